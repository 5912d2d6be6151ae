"""Run every case of the argument probe in this interpreter and print one ``RESULT`` line: a JSON
object ``{"module:name::case": encoded outcome}``. The switch (``ACCEL_AS_ACCELERATE``) of the
environment decides whether ``accelerate`` is accel or the reference.

Usage: python runner.py   (every case; ``test_argument_probe.py`` runs it twice)
"""

from __future__ import annotations

import enum
import importlib
import json
import logging
import math
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import cases
import cases_bigmodel  # noqa: F401  (registers its cases)
import cases_training  # noqa: F401


def encode(value: Any, depth: int = 0) -> Any:
    """A JSON form that keeps what a comparison needs: kinds of numbers, tensors by value."""
    import numpy as np
    import torch

    if depth > 8:
        return {"deep": type(value).__name__}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return {"enum": type(value).__name__, "value": encode(value.value, depth + 1)}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": repr(value) if not math.isfinite(value) else value}
    if isinstance(value, np.generic):
        return {"numpy": type(value).__name__, "value": value.item()}
    if isinstance(value, torch.Tensor):
        data = None if value.is_meta else value.detach().cpu().float().flatten().tolist()
        return {
            "tensor": str(value.dtype),
            "shape": list(value.shape),
            "device": value.device.type,
            "values": [round(v, 6) for v in data] if data is not None else None,
        }
    if isinstance(value, np.ndarray):
        return {"ndarray": str(value.dtype), "values": value.tolist()}
    if isinstance(value, (torch.device, torch.dtype)):
        return {type(value).__name__: str(value)}
    if isinstance(value, dict):
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return {type(value).__name__: [encode(v, depth + 1) for v in items]}
    if isinstance(value, type):
        return {"class": value.__name__}
    if isinstance(value, torch.nn.Module):
        return {"nn.Module": type(value).__name__, "state": encode(value.state_dict(), depth + 1)}
    return {"object": type(value).__name__}


def raised(error: BaseException) -> dict[str, Any]:
    return {
        "raised": type(error).__name__,
        "mro": [c.__name__ for c in type(error).__mro__],
        "message": str(error)[:300],
    }


def main() -> None:
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    results: dict[str, Any] = {}
    for (module, name), group in cases.CASES.items():
        key = module if name is None else f"{module}:{name}"
        try:
            target = importlib.import_module(module)
            if name is not None:
                target = getattr(target, name)
        except Exception as error:  # the name itself is missing: every case reports it
            for case_name in group:
                results[f"{key}::{case_name}"] = raised(error)
            continue
        for case_name, function in group.items():
            try:
                results[f"{key}::{case_name}"] = encode(function(target))
            except Exception as error:
                results[f"{key}::{case_name}"] = raised(error)
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main()
