"""fusion onnxruntime's plan for a model whose spec ops all fold back into the original's
nodes (MatMulNBits, GatherBlockQuantized, QOperator): nothing is left for onnxruntime's
optimizer to decide on, so the plan is read off the lowered graph without a session (at 3.8B
that session restored and wrote every weight twice). Held to the plan onnxruntime's optimized
graph gives, model by model."""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx_ir as ir
import pytest

import quantgraph
from quantgraph.fusion.ort import ort_engine, ort_optimized
from tests import published, qoperator_models
from tools.decoders import TINY, decoder_proto

ALL = 99  # ORT_ENABLE_ALL

MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "matmul_nbits": lambda: published.matmul_nbits(),
    "matmul_nbits_packed_zero_points_bias": lambda: published.matmul_nbits(
        56, 24, 16, 4, zero_points="packed", bias=True
    ),
    "matmul_nbits_8bit_accuracy_level_4": lambda: published.matmul_nbits(bits=8, accuracy_level=4),
    "decoder": lambda: decoder_proto(TINY.replace(layers=2)),
    "decoder_zero_points": lambda: decoder_proto(TINY.replace(layers=2, zero_points=True)),
}
# A spec op stays a node of its own after lowering (a QOperator model's Q at its input and DQ
# at its output; a tied embedding's dequantize): onnxruntime's optimizer decides on it.
ASKS = {
    "qoperator": lambda: qoperator_models.qoperator("u8"),
    "decoder_tied": lambda: decoder_proto(TINY.replace(layers=2, tied_embeddings=True)),
}


def _plan(converted: onnx.ModelProto) -> dict[str, object]:
    return ort_engine.plan(ir.from_proto(converted), ALL).to_dict()


CASES = [(name, True) for name in sorted(MODELS)] + [(name, False) for name in sorted(ASKS)]


@pytest.mark.parametrize(("name", "folds_back"), CASES)
def test_onnxruntime_is_asked_only_when_a_spec_op_stays_on_its_own(
    name: str, folds_back: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folding back: no session, and the plan is the one onnxruntime's optimized graph gives."""
    converted = quantgraph.convert((MODELS if folds_back else ASKS)[name]()).proto
    asked = _counting(monkeypatch)
    quick = _plan(converted)
    if not folds_back:
        assert asked == [ALL]
        return
    assert not asked
    real = ort_optimized.optimized_graph
    monkeypatch.setattr(ort_engine, "weightless_graph", lambda model: real(model, ALL))
    assert quick == _plan(converted)
    assert quick["units"], quick


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The levels the plan asks onnxruntime's optimized graph at, from now on."""
    asked: list[int] = []
    real = ort_optimized.optimized_graph

    def counted(model: ir.Model, level: int) -> onnx.ModelProto:
        asked.append(level)
        return real(model, level)

    monkeypatch.setattr(ort_engine, "optimized_graph", counted)
    return asked
