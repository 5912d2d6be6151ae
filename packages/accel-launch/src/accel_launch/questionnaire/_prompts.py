"""Asking questions in a terminal: arrow-key menus when there is one, numbered prompts
otherwise (a pipe, a file, a CI log)."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, TypeVar

from .._errors import ConfigError

T = TypeVar("T")

_UP = ("\x1b[A", "\x1bOA", "k")
_DOWN = ("\x1b[B", "\x1bOB", "j")


class Prompter:
    """Asks the questions of ``accel config`` on ``stdin`` / ``stdout``.

    Args:
        stdin: Where answers come from.
        stdout: Where questions go.
        menus: Use arrow-key menus; default: when both streams are terminals.
    """

    def __init__(
        self,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
        menus: bool | None = None,
    ) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        if menus is None:
            menus = _isatty(self.stdin) and _isatty(self.stdout)
        self.menus = menus

    def _write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _readline(self) -> str:
        line = self.stdin.readline()
        if not line:
            raise ConfigError(
                "accel config needs an answer but its input ended. Run it in a terminal, or "
                "pipe one answer per line."
            )
        if not self.menus and not _isatty(self.stdin):
            self._write(line if line.endswith("\n") else line + "\n")  # a readable log
        return line.strip()

    def ask(
        self,
        question: str,
        default: T | None,
        convert: Callable[[str], T] = str,  # type: ignore[assignment]
        check: Callable[[T], str | None] | None = None,
    ) -> T:
        """Ask for a value; an empty answer takes ``default``. Asks again after a bad answer.

        Args:
            question: The question.
            default: The value of an empty answer (``None``: no default).
            convert: Turns the text into the value; a ``ValueError`` means a bad answer.
            check: Returns an error message for a value that is not allowed, else None.
        """
        shown = "" if default is None else f" [{_show(default)}]"
        while True:
            self._write(f"{question}{shown}: ")
            text = self._readline()
            if not text:
                if default is not None:
                    return default
                self._write("Please answer (there is no default).\n")
                continue
            try:
                value = convert(text)
            except ValueError as err:
                self._write(f"{text!r} is not accepted: {err}.\n")
                continue
            problem = check(value) if check else None
            if problem:
                self._write(f"{problem}; try again.\n")
                continue
            return value

    def yes_no(self, question: str, default: bool = False) -> bool:
        """Ask a yes/no question."""
        return self.ask(f"{question} (yes/no)", default, convert=_yes_no)

    def choose(self, question: str, options: Sequence[str], default: int = 0) -> int:
        """Ask for one of ``options``; return its index."""
        if self.menus:
            return self._menu(question, options, default)
        self._write(f"{question}\n")
        for i, option in enumerate(options):
            self._write(f"   {_numbered(i, option)}\n")

        def number_of(text: str) -> int:
            if text.isdecimal() and 1 <= int(text) <= len(options):
                return int(text)
            lowered = [o.lower() for o in options]
            if text.lower() in lowered:
                return lowered.index(text.lower()) + 1
            raise ValueError(f"answer a number from 1 to {len(options)}, or an option's text")

        return self.ask("Your choice", default + 1, convert=number_of) - 1

    def _menu(self, question: str, options: Sequence[str], default: int) -> int:
        import termios
        import tty

        fd = self.stdin.fileno()
        saved = termios.tcgetattr(fd)
        selected = default
        tty.setcbreak(fd, termios.TCSANOW)
        try:
            self._write(f"{question} (arrow keys or a number, then Enter)\n\x1b[?25l")
            self._draw(options, selected, first=True)
            while True:
                key = _read_key(fd)
                if key in ("\r", "\n"):
                    break
                if key in _UP:
                    selected = (selected - 1) % len(options)
                elif key in _DOWN:
                    selected = (selected + 1) % len(options)
                elif key.isdecimal() and 1 <= int(key) <= len(options):
                    selected = int(key) - 1
                else:
                    continue
                self._draw(options, selected, first=False)
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)
            self._write("\x1b[?25h")
        self._write(f"-> {options[selected]}\n")
        return selected

    def _draw(self, options: Sequence[str], selected: int, first: bool) -> None:
        out = "" if first else f"\x1b[{len(options)}A"
        for i, option in enumerate(options):
            marker = " > " if i == selected else "   "
            out += f"\r\x1b[2K{marker}{_numbered(i, option)}\n"
        self._write(out)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _read_key(fd: int) -> str:
    char = os.read(fd, 1).decode(errors="replace")
    if not char:
        raise ConfigError("accel config: the terminal closed before an answer was chosen.")
    if char == "\x1b":
        char += os.read(fd, 2).decode(errors="replace")
    return char


def _numbered(index: int, option: str) -> str:
    """How option ``index`` is shown, in a menu and in a numbered list alike: ``1) text``."""
    return f"{index + 1}) {option}"


def whole(text: str) -> int:
    """An answer that is a whole number."""
    try:
        return int(text)
    except ValueError:
        raise ValueError("answer a whole number, e.g. 2") from None


def number(text: str) -> float:
    """An answer that is a finite number."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError("answer a number, e.g. 1.0")
    return value


def _yes_no(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("y", "yes", "true", "1"):
        return True
    if lowered in ("n", "no", "false", "0"):
        return False
    raise ValueError("answer yes or no")


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value) if value != "" else "none"
