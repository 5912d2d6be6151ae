"""The script the reference's launcher tests start (``test_utils/scripts/test_cli.py``): it
prints how many accelerators the launched process sees, so a launch with no config file can be
checked end to end."""

from __future__ import annotations


def main() -> None:
    """Print ``Successfully ran on N GPUs`` (or XPUs) for this process."""
    import torch

    kind, count = "GPU", 0
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
    elif hasattr(torch, "xpu") and torch.xpu.is_available():
        kind, count = "XPU", torch.xpu.device_count()
    print(f"Successfully ran on {count} {kind}s")


if __name__ == "__main__":
    main()
