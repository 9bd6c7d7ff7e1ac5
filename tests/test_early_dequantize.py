"""An unfused session that would hold every weight in float at once says so: onnxruntime's
order runs each weight's dequantize before the nodes its fusions make (quantgraph/runtime/
early_dequantize.py)."""

from __future__ import annotations

import warnings

import onnx
import onnxruntime as ort
import pytest

import quantgraph
from quantgraph.errors import QuantgraphWarning
from quantgraph.ir.model_files import load_model
from quantgraph.runtime import early_dequantize
from tools.decoders import TINY, decoder_proto


@pytest.fixture(scope="module")
def converted() -> onnx.ModelProto:
    return quantgraph.convert(decoder_proto(TINY.replace(layers=2))).proto


def _told(model: onnx.ModelProto, level: int, fusion: str = "none") -> list[str]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel(level)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quantgraph.InferenceSession(model, options=options, fusion=fusion)
    return [str(w.message) for w in caught if issubclass(w.category, QuantgraphWarning)]


def test_the_float_weights_are_counted(converted: onnx.ModelProto) -> None:
    """Every dequantized weight of the decoder: its elements, 4 bytes each (float32)."""
    model = load_model(converted)
    elements = 0
    for node in model.graph:
        source = node.inputs[0] if node.op_type == "DynamicDequantize" else None
        weight = source.const_value if source is not None else None
        if weight is not None:
            elements += weight.size
    assert elements > 0
    assert early_dequantize.dequantized_weight_bytes(model) == 4 * elements


def test_told_unfused_at_extended_and_up_only(
    converted: onnx.ModelProto, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(early_dequantize, "TOLD_FROM", 1)
    (all_levels,) = _told(converted, 99)
    assert "ORT_ENABLE_ALL" in all_levels and "fusion 'onnxruntime'" in all_levels
    assert len(_told(converted, 2)) == 1
    assert _told(converted, 1) == []  # no fused node: the graph's order
    assert _told(converted, 99, fusion="onnxruntime") == []  # the original's MatMulNBits


def test_a_small_model_is_not_told(converted: onnx.ModelProto) -> None:
    assert _told(converted, 99) == []
