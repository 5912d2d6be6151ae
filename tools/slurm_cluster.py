"""A one-machine SLURM cluster (slurmctld + slurmd + munge) in a folder of its own.

Everything the daemons write (configuration, munge key, state, spool, logs, pid files) lives
under one folder, on ports chosen free at start, so the cluster touches nothing of the
machine's own SLURM or munge setup. It runs as root, with process tracking by ``/proc``
(``proctrack/linuxproc``), no task plugin and no cgroups, which is what a container allows.

Usage::

    python tools/slurm_cluster.py start /tmp/cluster     # prints `export SLURM_CONF=...`
    SLURM_CONF=/tmp/cluster/slurm.conf srun -n 2 hostname
    python tools/slurm_cluster.py stop /tmp/cluster

From Python, :class:`SlurmCluster` is a context manager that stops the daemons on exit, even
when the body fails.

Debian / Ubuntu: ``apt-get install -y slurm-wlm munge`` provides the commands.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "sinfo")
"""Commands the cluster needs on PATH (``/usr/sbin`` is searched too)."""
INSTALL_HINT = "Install them: apt-get install -y slurm-wlm munge"


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/local/sbin")


def missing_commands() -> list[str]:
    """The commands of :data:`COMMANDS` that are not installed."""
    return [name for name in COMMANDS if _which(name) is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_conf(root: Path, cpus: int) -> Path:
    ctld_port, slurmd_port = _free_port(), _free_port()
    while slurmd_port == ctld_port:
        slurmd_port = _free_port()
    lines = [
        "ClusterName=accel",
        "SlurmctldHost=localhost",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",
        "MpiDefault=none",
        "ReturnToService=2",
        "KillWait=5",
        "InactiveLimit=0",
        f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
        "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
    ]
    conf = root / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


class SlurmCluster:
    """Start and stop a one-node SLURM cluster whose files all live under ``root``.

    Args:
        root: An empty or missing folder (created).
        cpus: CPUs the node offers to jobs.
    """

    def __init__(self, root: str | os.PathLike[str], cpus: int = 2) -> None:
        self.root = Path(root).resolve()
        self.cpus = cpus
        self.conf = self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Variables that point SLURM's commands at this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60.0) -> SlurmCluster:
        """Start munged, slurmctld and slurmd; wait until the node takes jobs.

        Raises:
            RuntimeError: naming the missing commands, or with the daemons' logs when the node
                is not ready within ``timeout`` seconds (the daemons are stopped first).
        """
        missing = missing_commands()
        if missing:
            raise RuntimeError(f"SLURM commands missing: {', '.join(missing)}. {INSTALL_HINT}")
        for name in ("munge", "state", "spool"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            os.chmod(key, 0o400)
        _write_conf(self.root, self.cpus)
        try:
            self._run_daemon(
                "munged",
                "--force",
                f"--key-file={key}",
                f"--socket={self.root / 'munge' / 'munge.socket'}",
                f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                f"--log-file={self.root / 'munge' / 'munged.log'}",
                f"--seed-file={self.root / 'munge' / 'munged.seed'}",
            )
            self._wait_for(self.root / "munge" / "munge.socket", timeout)
            self._run_daemon("slurmctld", "-f", str(self.conf))
            self._wait_for(self.root / "slurmctld.pid", timeout)
            self._run_daemon("slurmd", "-f", str(self.conf), "-N", "localhost")
            self._wait_until_idle(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _run_daemon(self, name: str, *args: str) -> None:
        command = [str(_which(name)), *args]
        env = {**os.environ, **self.env}
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(
                f"{name} did not start (exit {result.returncode}): {result.stderr.strip()}\n"
                f"{self.logs()}"
            )

    def _wait_for(self, path: Path, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path} did not appear within {timeout}s.\n{self.logs()}")
            time.sleep(0.2)

    def _wait_until_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            result = subprocess.run(
                [str(_which("sinfo")), "-h", "-N", "-o", "%T"],
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                timeout=30,
            )
            state = result.stdout.strip()
            if state.startswith("idle"):
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"the node is not idle after {timeout}s (state {state!r}).\n{self.logs()}"
        )

    def logs(self) -> str:
        """The daemons' log files, for an error message."""
        parts = []
        for name in ("munge/munged.log", "slurmctld.log", "slurmd.log"):
            path = self.root / name
            if path.is_file():
                parts.append(f"--- {name} ---\n{path.read_text()[-4000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop the daemons started from ``root`` (those whose pid files are there)."""
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            _terminate(self.root / pid_file)

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _terminate(pid_file: Path, timeout: float = 15.0) -> None:
    """Stop the process named by ``pid_file``: SIGTERM, then SIGKILL after ``timeout``."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pid_file.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """``start ROOT`` or ``stop ROOT``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("root", help="Folder holding the cluster's files.")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the node (default 2).")
    args = parser.parse_args(argv)
    cluster = SlurmCluster(args.root, cpus=args.cpus)
    if args.action == "start":
        try:
            cluster.start()
        except RuntimeError as err:
            print(err, file=sys.stderr)
            return 1
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
