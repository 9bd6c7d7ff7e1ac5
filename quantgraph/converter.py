"""The product's main jobs as calls: rewrite a QDQ model into the spec ops, and back."""

from __future__ import annotations

from typing import NamedTuple

import onnx
import onnx_ir as ir

from .io import ModelLike, load_model
from .passes import QdqToSpecPass, RewriteReport, SpecToQdqPass
from .schemas import register as register_schemas


class ConvertResult(NamedTuple):
    model: onnx.ModelProto
    report: RewriteReport


def convert(model: ModelLike, *, static: bool = False, check: bool = True) -> ConvertResult:
    """Rewrite ``model``'s QuantizeLinear/DequantizeLinear into quantgraph's ops.

    ``static=True`` emits Quantize/Dequantize (attributes ``scales``/``zps``) wherever scale
    and zero point are constants. The input (path, bytes or proto) is never modified. With
    ``check``, the result must pass ``onnx.checker.check_model(full_check=True)``.
    """
    return _apply(QdqToSpecPass(static=static), model, check)


def lower(model: ModelLike, *, check: bool = True) -> ConvertResult:
    """Rewrite quantgraph's ops back into standard QuantizeLinear/DequantizeLinear."""
    return _apply(SpecToQdqPass(), model, check)


def _apply(rewrite: ir.passes.InPlacePass, model: ModelLike, check: bool) -> ConvertResult:
    register_schemas()
    # Work on a private copy: an ir.Model argument is the caller's object.
    graph = ir.from_proto(ir.to_proto(model)) if isinstance(model, ir.Model) else load_model(model)
    result = rewrite(graph)
    report = getattr(result, "report", None) or RewriteReport()
    proto = ir.to_proto(result.model)
    if check:
        onnx.checker.check_model(proto, full_check=True)
    return ConvertResult(proto, report)
