"""The product's main job as one call: read a QDQ model, rewrite it into the spec ops."""

from __future__ import annotations

from typing import NamedTuple

import onnx
import onnx_ir as ir

from .io import ModelLike, load_model
from .passes import QdqToSpecPass, RewriteReport
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
    register_schemas()
    # A private copy: ir.from_proto shares nothing the caller can see, but an ir.Model is
    # the caller's object, so round-trip it.
    graph = ir.from_proto(ir.to_proto(model)) if isinstance(model, ir.Model) else load_model(model)
    result = QdqToSpecPass(static=static)(graph)
    report = result.report if hasattr(result, "report") else RewriteReport()
    proto = ir.to_proto(result.model)
    if check:
        onnx.checker.check_model(proto, full_check=True)
    return ConvertResult(proto, report)
