"""``accel launch`` with a backend registered from outside accel_launch: ``--through_shell``
starts the processes with one ``sh`` that runs each rank through ``env``, under ``nice`` at the
niceness of its config-file setting ``shell_niceness`` (or flag ``--shell_niceness``).

Run as ``python launch_through_shell.py <accel launch arguments>``."""

import argparse
import shlex
import sys

from accel_launch import (
    ConfigError,
    ConfigField,
    LaunchCommand,
    Launcher,
    LaunchTarget,
    register_launcher,
)
from accel_launch.cli import main


def check_niceness(value: int, config) -> None:
    if not 0 <= value <= 19:
        raise ConfigError(
            f"shell_niceness must be in [0, 19]; got {value}. Use e.g. 5, or 0 for none."
        )


class ShellLauncher(Launcher):
    name = "shell"
    config_fields = (
        ConfigField(
            "shell_niceness", int, 0, "Niceness of every rank (nice -n).", check=check_niceness
        ),
    )

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--through_shell", action="store_true", help="Start the ranks with one sh."
        )
        group.add_argument("--shell_niceness", type=int, default=None, help="nice -n of ranks.")

    def applies(self, plan, args: argparse.Namespace) -> bool:
        return bool(getattr(args, "through_shell", False))

    def build(self, plan, target: LaunchTarget, port: int, env: dict) -> LaunchCommand:
        count = plan.config.num_processes
        niceness = plan.config.shell_niceness
        print(f"shell backend: niceness {niceness}", file=sys.stderr)
        command = shlex.join(["nice", "-n", str(niceness), *target.python_command()])
        ranks = [
            f"env RANK={rank} LOCAL_RANK={rank} WORLD_SIZE={count} LOCAL_WORLD_SIZE={count} "
            f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port} {command} &"
            for rank in range(count)
        ]
        script = "\n".join(
            [*ranks, "code=0", "for job in $(jobs -p); do wait $job || code=$?; done", "exit $code"]
        )
        return LaunchCommand(self.name, ["sh", "-c", script], env)


register_launcher(ShellLauncher())
sys.exit(main(["launch", *sys.argv[1:]]))
