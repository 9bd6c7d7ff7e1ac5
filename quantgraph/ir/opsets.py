"""The one rule on a model's ONNX opset, shared by convert, lower, validate and run.

quantgraph's rewrite, its schemas and its lowering know QuantizeLinear/DequantizeLinear of
opsets MIN_OPSET..MAX_OPSET; a model outside that range is refused before any work, with the
direction of the conversion it needs.
"""

from __future__ import annotations

import os

import onnx_ir as ir

from ..errors import ModelError

MIN_OPSET, MAX_OPSET = 10, 25


def default_opset(model: ir.Model) -> int | None:
    """The model's ONNX (default domain) opset, None when it imports none."""
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx"))


def opset_problem(version: int | None) -> str | None:
    """Why ``version`` is refused (the sentence users see), or None when it is supported."""
    if version is None or MIN_OPSET <= version <= MAX_OPSET:
        return None
    direction, target = ("newer", MAX_OPSET) if version > MAX_OPSET else ("older", MIN_OPSET)
    verb = "down" if version > MAX_OPSET else "up"
    return (
        f"opset {version} is {direction} than quantgraph supports ({MIN_OPSET} to {MAX_OPSET}): "
        f"convert the model {verb} to opset {target} first "
        f"(onnx.version_converter.convert_version(model, {target}), or export it at that opset)"
    )


def check_opset(model: ir.Model, source: object = None) -> None:
    """Raise :class:`ModelError` when ``model``'s opset is outside the supported range;
    ``source`` (a path) names the file in the message."""
    problem = opset_problem(default_opset(model))
    if problem is not None:
        label = f"{source}: " if isinstance(source, (str, os.PathLike)) else ""
        raise ModelError(label + problem)
