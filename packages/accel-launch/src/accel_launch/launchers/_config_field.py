"""A config-file setting owned by a launcher backend, declared in the backend's module: its
name, type, default and help, how its value is checked, and the question ``accel config`` asks
for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..configs._config_file import LaunchConfig
    from ..configs._config_values import ConfigValue


@dataclass(frozen=True)
class ConfigField:
    """One top-level setting of the config file that a launcher backend reads.

    Declare it in the backend's ``config_fields``; once the backend is registered, a config
    file may set it (read as ``type``, refused with the rule, value and fix otherwise), a flag
    of the same name set by the backend's ``add_flags`` overrides it, ``accel env`` and
    ``--explain`` show it, and ``plan.config.<name>`` holds its value in ``build``.
    """

    name: str
    """The key of the config file (and the attribute of ``LaunchConfig``)."""
    type: Any
    """``int``, ``float``, ``bool`` or ``str``, or one of them ``| None``."""
    default: Any
    """The value when neither the config file nor a flag sets it."""
    help: str
    """One line saying what the setting does."""
    check: Callable[[Any, LaunchConfig], None] | None = None
    """Called with the value and the whole config when the config is validated; raises
    ``ConfigError`` with the rule, the value and the fix."""
    prompt: str | None = None
    """The question ``accel config`` asks for it on a run over several machines (None: not
    asked)."""
    confirm: str | None = None
    """A yes/no question asked before ``prompt`` (default no: the setting keeps its
    default)."""
    asked_for: tuple[str, ...] = ()
    """The kinds of machines (``multi-CPU``, ``multi-GPU``) whose questionnaire asks it; empty:
    all of them."""
    answer_check: Callable[[Any], str | None] | None = None
    """Checks an answer of ``accel config``: a sentence saying what is wrong, or None."""
    replaces: str | None = None
    """``section.key`` of an older file format that ``accel config update`` turns into this
    setting (the section is dropped)."""

    @property
    def annotation(self) -> str:
        """The type as written in ``LaunchConfig`` (``"str | None"``)."""
        kind = self.type
        return kind.__name__ if isinstance(kind, type) else str(kind)

    def read(self, value: object) -> ConfigValue:
        """``value`` converted to the declared type.

        Raises:
            ConfigError: when it cannot be, naming the setting, the value and the fix.
        """
        from ..configs._config_values import coerce

        return coerce(value, self.annotation, self.name)


def check_fields(launcher: str, fields: tuple[object, ...]) -> None:
    """Refuse ``config_fields`` that are not ``ConfigField`` declarations.

    Raises:
        ValueError: naming the backend, the entry and the fix.
    """
    for entry in fields:
        if not isinstance(entry, ConfigField) or not entry.name.isidentifier():
            raise ValueError(
                f"config_fields of launcher {launcher!r} holds ConfigField declarations with a "
                f"name that is a Python identifier; got {entry!r}. Write "
                "ConfigField('name', str | None, None, 'one line of help')."
            )
