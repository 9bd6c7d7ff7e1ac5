"""The pass pipelines of quantgraph's jobs, each an onnx-ir PassManager of small passes."""

from __future__ import annotations

import onnx_ir as ir

from ..ir.checker import OpKey
from ..ir.walk import graphs_fixed
from .contrib.gather_block_quantized import GatherBlockQuantizedPass
from .contrib.matmul_nbits import MatMulNBitsPass
from .contrib.restore_gather_block import RestoreGatherBlockQuantizedPass
from .contrib.restore_nbits import RestoreMatMulNBitsPass
from .full_check import FullCheckPass
from .integer.dynamic_quantize_linear import (
    DynamicQuantizeLinearPass,
    RestoreDynamicQuantizeLinearPass,
)
from .integer.integer_ops import IntegerOpsPass
from .integer.other_formats import OtherFormatsPass
from .integer.qoperator import QOperatorPass
from .integer.restore_integer_ops import RestoreIntegerOpsPass
from .integer.restore_qoperator import RestoreQOperatorPass
from .node_rewrite import Progress
from .qdq.cast_scale import CastScalePass
from .qdq.qdq_to_spec import QdqToSpecPass
from .qdq.restore_cast_scale import RestoreCastScalePass
from .qdq.short_blocks import PadShortBlocksPass, TrimPaddedBlocksPass
from .qdq.spec_to_qdq import SpecToQdqPass
from .report import RewriteReport
from .unknown_dims import UnknownDimsPass


def conversion(
    report: RewriteReport,
    *,
    static: bool = False,
    contrib: bool = True,
    check: bool = True,
    progress: Progress | None = None,
    accepted: frozenset[OpKey] = frozenset(),
) -> ir.passes.PassManager:
    """Q/DQ -> spec ops, then onnx's full check (schemas and shape inference included).

    Quantized nodes of other formats are listed; DynamicQuantizeLinear gets its scale and zero
    point from standard ops; short last blocks are padded to whole groups (and the padding of a
    node the rewrite skips is undone)."""
    rewrite = QdqToSpecPass(static=static, contrib=contrib, report=report, progress=progress)
    passes: list[ir.passes.PassBase] = [
        UnknownDimsPass(),
        OtherFormatsPass(report),
        MatMulNBitsPass(report=report, progress=progress),
        GatherBlockQuantizedPass(report=report, progress=progress),
        CastScalePass(report=report),
        IntegerOpsPass(report=report),  # reads DynamicQuantizeLinear before its rewrite
        QOperatorPass(report=report, progress=progress),
        DynamicQuantizeLinearPass(report=report),
        PadShortBlocksPass(),
        rewrite,
        TrimPaddedBlocksPass(),
    ]
    return _with_check(passes, check, accepted)


def lowering(
    report: RewriteReport,
    *,
    check: bool = True,
    to_qdq: bool = False,
    gather_qdq: bool = False,
    accepted: frozenset[OpKey] = frozenset(),
) -> ir.passes.PassManager:
    """Spec ops -> standard Q/DQ, then onnx's full check; what conversion expanded
    (DynamicQuantizeLinear, padded short blocks, MatMulNBits, GatherBlockQuantized, QOperator
    nodes) is folded back into the original node; ``to_qdq`` keeps a converted MatMulNBits,
    GatherBlockQuantized or QOperator node in its Q/DQ form (DequantizeLinear -> MatMul,
    Gather -> DequantizeLinear, DequantizeLinear -> Conv -> QuantizeLinear...);
    ``gather_qdq`` that of GatherBlockQuantized only (onnxruntime does not fuse it back)."""
    restore: list[ir.passes.PassBase] = []
    if not to_qdq:
        restore.append(RestoreMatMulNBitsPass(report=report))
        if not gather_qdq:
            restore.append(RestoreGatherBlockQuantizedPass(report=report))
    # QOperator nodes come back from the standard Q/DQ the spec ops lower to
    after: list[ir.passes.PassBase] = [] if to_qdq else [RestoreQOperatorPass(report=report)]
    passes: list[ir.passes.PassBase] = [
        UnknownDimsPass(),
        *restore,
        RestoreCastScalePass(report=report),  # Cast/Sub/Mul are standard already: even to_qdq
        RestoreIntegerOpsPass(report=report),  # before DynamicQuantizeLinear comes back
        RestoreDynamicQuantizeLinearPass(report=report),
        SpecToQdqPass(report=report),
        *after,
        TrimPaddedBlocksPass(),
    ]
    return _with_check(passes, check, accepted)


def _with_check(
    passes: list[ir.passes.PassBase], check: bool, accepted: frozenset[OpKey]
) -> ir.passes.PassManager:
    """``accepted``: ops of the original onnx does not know (:mod:`quantgraph.ir.checker`)."""
    if check:
        passes.append(FullCheckPass(accepted))
    return ir.passes.PassManager(passes, steps=1)


def run(manager: ir.passes.PassManager, model: ir.Model) -> ir.passes.PassResult:
    """Run ``manager`` on ``model``; a failing pass raises its own error, not onnx-ir's
    PassError wrappers (which name the pipeline, not the node or rule at fault), nor the
    Pre/PostconditionError around a requirement's (see :mod:`.requirements`).

    The model's graphs are found once for the whole run: no pass adds or removes a subgraph
    or a function (:func:`~quantgraph.ir.walk.graphs_fixed`)."""
    wrappers = (ir.passes.PassError, ir.passes.InvariantError)
    try:
        with graphs_fixed(model):
            return manager(model)
    except wrappers as error:
        cause: BaseException = error
        while isinstance(cause, wrappers) and cause.__cause__ is not None:
            cause = cause.__cause__
        raise cause from None
