"""A DeepSpeed JSON config as the plugin reads it: the view over its dotted keys (the
reference's ``HfDeepSpeedConfig``), and the filling of its ``"auto"`` values with a check that
the values written in the file agree with the ones the run computes."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

AUTO = "auto"


class HfDeepSpeedConfig:
    """Read access to a DeepSpeed config given as a dict or a JSON file path.

    Dotted keys reach nested values: ``config.get_value("zero_optimization.stage")``.

    Args:
        config_file_or_dict: A dict (copied), or the path of a JSON file.
    """

    def __init__(self, config_file_or_dict: dict[str, Any] | str | os.PathLike[str]) -> None:
        if isinstance(config_file_or_dict, dict):
            config = copy.deepcopy(config_file_or_dict)
        elif isinstance(config_file_or_dict, (str, os.PathLike)):
            path = os.fspath(config_file_or_dict)
            if not os.path.isfile(path):
                raise ValueError(
                    "a DeepSpeed config must be a dict or the path of an existing JSON file; "
                    f"got {path!r}, which is not a file. Check the path."
                )
            try:
                with open(path, encoding="utf-8") as handle:
                    config = json.load(handle)
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                raise ValueError(
                    f"a DeepSpeed config file holds one JSON object; {path!r} is not valid JSON "
                    f"({err}). Fix the file, or pass the config as a dict."
                ) from None
            if not isinstance(config, dict):
                raise ValueError(
                    f"a DeepSpeed config file holds one JSON object; {path!r} holds a "
                    f"{type(config).__name__}. Write the settings as an object ({{...}})."
                )
        else:
            raise TypeError(
                "a DeepSpeed config must be a dict or the path of a JSON file; got "
                f"{type(config_file_or_dict).__name__}. Pass a dict or a path."
            )
        self.config: dict[str, Any] = config

    def find_config_node(self, ds_key_long: str) -> tuple[dict[str, Any] | None, str]:
        """Return the dict holding the last part of ``ds_key_long`` and that last part."""
        node: Any = self.config
        *parents, key = ds_key_long.split(".")
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                return None, key
        return (node if isinstance(node, dict) else None), key

    def get_value(self, ds_key_long: str, default: Any = None) -> Any:
        """The value at ``ds_key_long`` (dotted), or ``default`` when absent."""
        node, key = self.find_config_node(ds_key_long)
        if node is None:
            return default
        return node.get(key, default)

    def del_config_sub_tree(self, ds_key_long: str, must_exist: bool = False) -> None:
        """Delete the sub-tree at ``ds_key_long``."""
        node, key = self.find_config_node(ds_key_long)
        if node is None or key not in node:
            if must_exist:
                raise ValueError(f"the DeepSpeed config has no {ds_key_long!r}; got {self.config}.")
            return
        del node[key]

    def is_true(self, ds_key_long: str) -> bool:
        """Whether the value is present and true (``"auto"`` counts as not set)."""
        value = self.get_value(ds_key_long)
        return value is not None and value != AUTO and bool(value)

    def is_false(self, ds_key_long: str) -> bool:
        """Whether the value is present and false."""
        value = self.get_value(ds_key_long)
        return value is not None and value != AUTO and not bool(value)

    def is_auto(self, ds_key_long: str) -> bool:
        """Whether the value is the string ``"auto"``."""
        return self.get_value(ds_key_long) == AUTO

    def get_zero_stage(self) -> int:
        """The ZeRO stage (0 when the config has none)."""
        stage = self.get_value("zero_optimization.stage", 0)
        return 0 if stage == AUTO else int(stage)

    def is_zero2(self) -> bool:
        """Whether the config uses ZeRO stage 2."""
        return self.get_zero_stage() == 2

    def is_zero3(self) -> bool:
        """Whether the config uses ZeRO stage 3."""
        return self.get_zero_stage() == 3

    def is_offload(self) -> bool:
        """Whether optimizer states or parameters are offloaded to CPU or NVMe."""
        return any(
            self.get_value(f"zero_optimization.{part}.device") in ("cpu", "nvme")
            for part in ("offload_optimizer", "offload_param")
        )


def fill_match(
    config: HfDeepSpeedConfig,
    ds_key_long: str,
    value: Any,
    mismatches: list[str],
    must_match: bool = True,
) -> None:
    """Fill ``ds_key_long`` when it is ``"auto"``; else record a mismatch with ``value``.

    Args:
        config: The config being completed.
        ds_key_long: Dotted key.
        value: What the Accelerator / launcher says (None: nothing to fill or check).
        mismatches: Receives one line per disagreement.
        must_match: Record disagreements (False: only fill ``"auto"``).
    """
    node, key = config.find_config_node(ds_key_long)
    if node is None or key not in node or value is None:
        return
    current = node[key]
    if current == AUTO:
        node[key] = value
    elif must_match and not _same(current, value):
        mismatches.append(f"- ds {ds_key_long}={current!r} vs accel {value!r}")


def _same(config_value: Any, value: Any) -> bool:
    if isinstance(value, bool) or isinstance(config_value, bool):
        return bool(config_value) == bool(value)
    if isinstance(value, (int, float)) and isinstance(config_value, (int, float)):
        return float(config_value) == float(value)
    if isinstance(value, (list, tuple)) and isinstance(config_value, (list, tuple)):
        return len(value) == len(config_value) and all(
            _same(a, b) for a, b in zip(config_value, value)
        )
    return config_value == value


def raise_mismatches(mismatches: list[str]) -> None:
    if mismatches:
        lines = "\n".join(mismatches)
        raise ValueError(
            "the DeepSpeed config must agree with the values given to the Accelerator, the "
            "DeepSpeedPlugin and the launcher (a config never overrides them silently); got:\n"
            f'{lines}\nMake each pair equal, or write "auto" in the config so that it takes '
            "the Accelerator's value."
        )
