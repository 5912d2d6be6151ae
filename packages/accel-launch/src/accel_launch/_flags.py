"""The flags of ``accel launch``; unset flags stay ``None`` so the config file applies."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import inspect
import re
import sys
from typing import Any, NoReturn

from accel_state.environment_variables import (
    BACKWARD_PREFETCH,
    OFFLOAD_DEVICES,
    SHARDING_STRATEGIES,
    STATE_DICT_TYPES,
    WRAP_POLICIES,
)

from ._compat_flags import add_compat_arguments
from .commands._tpu import add_tpu_launch_arguments
from .configs._engine_configs import (
    DEEPSPEED_LAUNCHERS,
    DeepSpeedConfig,
    DynamoConfig,
    FSDPConfig,
    MegatronLMConfig,
    ParallelismSection,
    Section,
)
from .launchers._launcher_base import finite, integer

_BOOL_WORDS = {"1", "0", "true", "false", "yes", "no", "on", "off", "y", "n"}
_CHOICES: dict[str, tuple[str, ...]] = {
    "offload_optimizer_device": OFFLOAD_DEVICES,
    "offload_param_device": OFFLOAD_DEVICES,
    "deepspeed_multinode_launcher": DEEPSPEED_LAUNCHERS,
    "fsdp_sharding_strategy": SHARDING_STRATEGIES,
    "fsdp_auto_wrap_policy": WRAP_POLICIES,
    "fsdp_backward_prefetch": BACKWARD_PREFETCH,
    "fsdp_state_dict_type": STATE_DICT_TYPES,
}


def _bool_word(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in _BOOL_WORDS:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return lowered in ("1", "true", "yes", "on", "y")


class _StatedValueError(argparse.ArgumentTypeError):
    """A flag value refused by a message that already states the rule, the value and the fix:
    the parser prints that one line, without the flag's usage."""


class FlagParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line plus the usage of the flag at fault,
    not the usage of all the flags; a `_StatedValueError` is one line alone."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse does; the words are kept, so that an error can name the subcommand."""
        self._words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _suggestion(self, message: str) -> tuple[str, str] | None:
        """``(hint, usage line)`` for a mistyped subcommand or flag, else None."""
        subparsers = next(
            (a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        choice = re.match(r"argument \S+: invalid choice: '([^']*)'", message)
        if choice and subparsers is not None:
            close = difflib.get_close_matches(choice.group(1), list(subparsers.choices), n=1)
            if not close:
                return "", f"usage: {self.prog} --help lists the commands"
            meant = subparsers.choices[close[0]].prog
            return (
                f"did you mean '{close[0]}'?",
                f"usage: {meant} --help lists its flags ({self.prog} --help lists the commands)",
            )
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if not unknown:
            return None
        parser: argparse.ArgumentParser = self
        words = getattr(self, "_words", [])
        level = subparsers
        while level is not None:  # down to the deepest subcommand the words name
            named = [w for w in words if w in level.choices]
            if not named:
                break
            parser = level.choices[named[0]]
            level = next(
                (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
            )
        options = [o for o in parser._option_string_actions if o.startswith("--")]
        hints = []
        for word in unknown.group(1).split():
            flag = word.split("=", 1)[0]
            if flag.startswith("--"):
                close = difflib.get_close_matches(flag, options, n=1)
                if close:
                    hints.append(f"{flag}: did you mean {close[0]}?")
        self._at_fault = parser.prog  # the subcommand the unknown words were given to
        return "; ".join(hints), f"usage: {parser.prog} --help lists its flags"

    def error(self, message: str) -> NoReturn:
        """Print ``message`` and the usage of the flag it names, then exit with code 2. A
        mistyped subcommand or flag gets the closest real one and the ``--help`` to read."""
        lines = [f"{self.prog}: error: {message}"]
        suggestion = self._suggestion(message)
        if suggestion is not None:
            hint, usage = suggestion
            lines[0] = f"{getattr(self, '_at_fault', self.prog)}: error: {message}"
            if hint:
                lines[0] += f" ({hint})"
            self.exit(2, "\n".join([*lines, usage]) + "\n")
        # argparse calls this while handling the ArgumentError it made from the type's error.
        refused = sys.exc_info()[1]
        if isinstance(getattr(refused, "__context__", None), _StatedValueError):
            self.exit(2, lines[0] + "\n")
        match = re.match(r"argument ([^:]+): ", message)
        action = None
        if match:
            names = match.group(1).split("/")
            action = next(
                (a for a in self._actions if set(names) & set(a.option_strings) or a.dest in names),
                None,
            )
        if action is not None and action.option_strings:
            lines.append(f"usage: {self.prog} {flag_usage(action)}")
        else:
            lines.append(f"usage: {self.prog} --help lists every flag and argument")
        self.exit(2, "\n".join(lines) + "\n")


def flag_usage(action: argparse.Action) -> str:
    """``--name VALUE  help`` for one flag."""
    usage = action.option_strings[0]
    if action.nargs != 0:
        if action.choices:
            usage += " {" + ",".join(str(c) for c in action.choices) + "}"
        else:
            usage += " " + str(action.metavar or action.dest.upper())
    helped = (action.help or "").split(". ")[0].rstrip(".")
    return f"{usage}  ({helped})" if helped else usage


_DOCS: dict[str, dict[str, dict[str, str]]] = {}
"""The field docstrings of every class of a module, by module name, then class name."""


def _module_docs(module: str) -> dict[str, dict[str, str]]:
    """The field docstrings of the top-level classes of ``module``, read from one parse of its
    source (``inspect.getsource`` of each class would parse the whole module once per class)."""
    if module not in _DOCS:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
        found: dict[str, dict[str, str]] = {}
        for cls in tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            docs: dict[str, str] = {}
            for node, following in zip(cls.body, cls.body[1:]):
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                ):
                    text = " ".join(following.value.value.split())
                    docs[node.target.id] = text.replace("``", "`")
            found[cls.name] = docs
        _DOCS[module] = found
    return _DOCS[module]


def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of a dataclass, by field name, as ``--help``
    prints it (the docstrings' double backticks become single ones)."""
    return _module_docs(cls.__module__).get(cls.__qualname__, {})


def _store_true(parser: argparse._ActionsContainer, name: str, help_text: str) -> None:
    parser.add_argument(f"--{name}", action="store_true", default=None, help=help_text)


def _add_section(group: argparse._ArgumentGroup, cls: type[Section]) -> None:
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        kind = str(f.type).split("|")[0].strip()
        help_text = docs.get(f.name, "")
        if f.name in cls.switches:
            _store_true(group, f.name, help_text)
        elif kind == "bool":
            group.add_argument(
                f"--{f.name}",
                nargs="?",
                const=True,
                default=None,
                type=_bool_word,
                metavar="true|false",
                help=help_text,
            )
        else:
            group.add_argument(
                f"--{f.name}",
                default=None,
                type={"int": integer, "float": finite}.get(kind, str),
                help=help_text
                + (f" One of: {', '.join(_CHOICES[f.name])}." if f.name in _CHOICES else ""),
            )


def optional_bool_flags() -> set[str]:
    """Flags that take an optional true/false value (``--fsdp_offload_params [false]``), in
    both spellings."""
    return {
        spelling
        for cls in (DynamoConfig, DeepSpeedConfig, FSDPConfig, MegatronLMConfig)
        for f in dataclasses.fields(cls)
        if str(f.type).startswith("bool")
        for spelling in (f"--{f.name}", f"--{f.name.replace('_', '-')}")
    }


def add_dash_spellings(parser: argparse.ArgumentParser, shown: bool = True) -> None:
    """Give every ``--snake_case`` flag of ``parser`` its ``--kebab-case`` spelling too, as the
    reference launcher does (``--num-processes`` is ``--num_processes``); with ``shown=False``
    the spelling is parsed but ``--help`` keeps one spelling per flag."""
    for action in list(parser._actions):
        for option in list(action.option_strings):
            dashed = "--" + option[2:].replace("_", "-")
            if option.startswith("--") and dashed not in parser._option_string_actions:
                if shown:
                    action.option_strings = [*action.option_strings, dashed]
                parser._option_string_actions[dashed] = action


def add_launch_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every ``accel launch`` flag to ``parser``."""
    parser.add_argument(
        "--config_file",
        default=None,
        help="Config file to read (default: the file written by `accel config`, when it exists).",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="Print each resolved setting, where it came from and the command that would run, "
        "then exit.",
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        default=None,
        help="Do not print the launcher's own messages.",
    )
    _store_true(parser, "debug", "Check collectives across ranks (clear errors, not hangs).")
    hw = parser.add_argument_group("Hardware")
    _store_true(hw, "cpu", "Run on CPU even when accelerators are present.")
    hw.add_argument("--gpu_ids", default=None, help="GPUs to use: 'all' or e.g. '0,1'.")
    hw.add_argument(
        "--num_cpu_threads_per_process",
        type=integer,
        default=None,
        help="OMP_NUM_THREADS of each process (default: cores / processes on the machine).",
    )
    dist = parser.add_argument_group("Distributed")
    dist.add_argument(
        "--num_processes",
        type=integer,
        default=None,
        help="TOTAL number of processes over all machines (not per machine).",
    )
    dist.add_argument("--num_machines", type=integer, default=None, help="Number of machines.")
    dist.add_argument(
        "--machine_rank", type=integer, default=None, help="Index of this machine (0 = main)."
    )
    dist.add_argument("--main_process_ip", default=None, help="Address of machine 0.")
    dist.add_argument(
        "--main_process_port",
        type=integer,
        default=None,
        help="Rendezvous port (0 or absent: a free port on one machine, 29500 on several).",
    )
    _store_true(dist, "same_network", "All machines share one network.")
    dist.add_argument(
        "--hang_timeout",
        type=finite,
        default=None,
        help="Seconds a process may wait in one collective before every process reports its "
        "position and stack and the job exits (ACCEL_HANG_TIMEOUT; 0 turns the watchdog off).",
    )
    from .launchers._launcher_registry import registered

    for launcher in registered():  # each backend's own flags
        launcher.add_flags(dist)
    dist.add_argument(
        "--multi_gpu",
        action="store_true",
        help="One process per GPU (refused on a machine without CUDA devices, or with --cpu).",
    )
    prec = parser.add_argument_group("Precision and compilation")
    prec.add_argument("--mixed_precision", default=None, help="no, fp16, bf16 or fp8.")
    _add_section(prec, DynamoConfig)
    _store_true(
        prec,
        "downcast_bf16",
        "XLA with bf16: float32 to bf16, float64 to float32 (XLA_DOWNCAST_BF16).",
    )
    ds = parser.add_argument_group("DeepSpeed")
    _store_true(ds, "use_deepspeed", "Train with DeepSpeed.")
    _add_section(ds, DeepSpeedConfig)
    fsdp = parser.add_argument_group("FSDP")
    _store_true(fsdp, "use_fsdp", "Train with fully sharded data parallel.")
    _add_section(fsdp, FSDPConfig)
    layout = parser.add_argument_group("Parallelism layout (ParallelismConfig)")
    _add_section(layout, ParallelismSection)
    mlm = parser.add_argument_group("Megatron-LM")
    _store_true(mlm, "use_megatron_lm", "Train with Megatron-LM.")
    _add_section(mlm, MegatronLMConfig)
    script = parser.add_argument_group("What to run")
    script.add_argument(
        "--module",
        "-m",
        action="store_true",
        default=None,
        help="Run the target as a module (python -m).",
    )
    _store_true(script, "no_python", "Run the target as an executable, not a Python script.")
    _store_true(
        script,
        "as_accelerate",
        "Run the processes with accel answering every `import accelerate` "
        "(accel.install_as_accelerate() at interpreter start, via ACCEL_AS_ACCELERATE=1): "
        "for scripts that use transformers, PEFT, TRL or diffusers.",
    )
    parser.add_argument(
        "training_script",
        nargs="?",
        default=None,
        help="The script (or module, or executable) to run.",
    )
    parser.add_argument(
        "training_script_args", nargs=argparse.REMAINDER, help="Arguments of the script."
    )
    add_compat_arguments(parser)
    add_tpu_launch_arguments(parser)
    add_dash_spellings(parser)
    return parser


def normalize_argv(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Prepare ``accel launch`` arguments for argparse.

    ``-m module args`` becomes ``--module module args`` so the module's own flags (even
    ``--help``) go to the module, as with ``python -m``; a true/false flag given without a
    value gets ``true`` so it never swallows the script name. Nothing after the script is
    touched.
    """
    takes_value = {
        option: action.nargs != 0 for action in parser._actions for option in action.option_strings
    }
    optional = optional_bool_flags()
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "-m":
            return [*out, "--module", *argv[i + 1 :]]
        if not token.startswith("-"):
            return [*out, *argv[i:]]
        out.append(token)
        name = token.split("=", 1)[0]
        if "=" in token:
            i += 1
            continue
        if name in optional:
            following = argv[i + 1] if i + 1 < len(argv) else None
            if following is None or following.lower() not in _BOOL_WORDS:
                out.append("true")
                i += 1
                continue
            out.append(following)
            i += 2
            continue
        if takes_value.get(name) and i + 1 < len(argv):
            out.append(argv[i + 1])
            i += 2
            continue
        i += 1
    return out
