"""Preparing a model and its traced graph so that ``torch.distributed.pipelining`` can cut it.

Two things get in the way of cutting real models:

- ``torch.export`` records a region under ``torch.no_grad()`` or a disabled ``torch.autocast``
  (``transformers``' rotary embeddings use both) as a call to a wrapper operator holding a
  subgraph; rebuilding each stage's module hierarchy then loses that region's inputs. Inference
  runs without gradients and without autocast, so these regions are inlined as plain operations.
- A stage boundary is a ``pipe_split()`` call at the start of a module's forward; it is added on
  the instance only while tracing and removed afterwards.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import fx, nn


def _wrapper_body_index(node: fx.Node) -> int | None:
    """Index of the subgraph argument when ``node`` calls a wrapper that inference may inline."""
    if node.op != "call_function":
        return None
    ops = torch.ops.higher_order
    if node.target is getattr(ops, "wrap_with_set_grad_enabled", None):
        return 1
    if node.target is getattr(ops, "wrap_with_autocast", None):
        # (device_type, dtype, enabled, cache_enabled, body, *operands): only disabled autocast
        # is a no-op when no autocast is active.
        return 4 if node.args[2] is False else None
    return None


def _unique_attr(gm: fx.GraphModule, base: str) -> str:
    name, index = base, 0
    while hasattr(gm, name):
        index += 1
        name = f"{base}_{index}"
    return name


def _inline_one(gm: fx.GraphModule, node: fx.Node, body_index: int) -> None:
    body_node = node.args[body_index]
    assert isinstance(body_node, fx.Node) and isinstance(body_node.target, str)
    body: fx.GraphModule = getattr(gm, body_node.target)
    operands = node.args[body_index + 1 :]
    stack = node.meta.get("nn_module_stack")
    env: dict[fx.Node, Any] = {}
    results: Any = ()
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
    env.update(zip(placeholders, operands))
    with gm.graph.inserting_before(node):
        for inner in body.graph.nodes:
            if inner.op == "placeholder":
                continue
            if inner.op == "output":
                results = fx.map_arg(inner.args[0], lambda n: env[n])
                break
            if inner.op == "get_attr":
                name = _unique_attr(gm, str(inner.target).replace(".", "_"))
                setattr(gm, name, getattr(body, str(inner.target)))
                new = gm.graph.get_attr(name)
                new.meta.update(inner.meta)
            else:
                new = gm.graph.node_copy(inner, lambda n: env[n])
            if stack is not None and not new.meta.get("nn_module_stack"):
                new.meta["nn_module_stack"] = dict(stack)
            env[inner] = new
    for user in list(node.users):
        if user.op == "call_function" and user.target is operator.getitem:
            user.replace_all_uses_with(results[user.args[1]])
            gm.graph.erase_node(user)
    if node.users:
        node.replace_all_uses_with(results)
    gm.graph.erase_node(node)
    if not body_node.users:
        gm.graph.erase_node(body_node)


def inline_inference_wrappers(gm: fx.GraphModule) -> fx.GraphModule:
    """Inlines ``no_grad`` and disabled-autocast regions of a traced graph (nested ones too).

    Args:
        gm: The traced graph module; changed in place.

    Returns:
        ``gm``.
    """
    while True:
        found = next(
            ((n, i) for n in gm.graph.nodes if (i := _wrapper_body_index(n)) is not None), None
        )
        if found is None:
            break
        _inline_one(gm, *found)
    gm.graph.lint()
    gm.recompile()
    return gm


def _starting_a_stage(forward: Any, pipe_split: Any) -> Any:
    def split_then_forward(*args: Any, **kwargs: Any) -> Any:
        pipe_split()
        return forward(*args, **kwargs)

    return split_then_forward


@contextlib.contextmanager
def split_marks(model: nn.Module, split_points: Sequence[str], pipe_split: Any) -> Iterator[None]:
    """Makes each named module call ``pipe_split()`` first while the context is open.

    Args:
        model: The model.
        split_points: Names of the modules that start a stage.
        pipe_split: ``torch.distributed.pipelining.pipe_split``.
    """
    marked: list[tuple[nn.Module, Any]] = []
    try:
        for name in split_points:
            module = model.get_submodule(name)
            marked.append((module, module.__dict__.get("forward")))
            module.forward = _starting_a_stage(module.forward, pipe_split)
        yield
    finally:
        for module, own_forward in marked:
            if own_forward is None:
                module.__dict__.pop("forward", None)
            else:
                module.__dict__["forward"] = own_forward
