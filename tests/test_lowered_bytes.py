"""``lower(convert(m))`` gives back every initializer of ``m`` byte for byte (TensorProto
SerializeToString): scalar scales and zero points that quantize_static writes in float_data /
int32_data come back in those fields, not as raw_data (the same values, another encoding)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from tests import producers, published
from tests.qoperator_models import qoperator
from tools.fuzz.formats import rebuild

PRODUCERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "quantize_static-qdq": lambda: producers.static_quantized(13),
    "quantize_static-qdq-per-tensor": lambda: producers.static_quantized(13, per_channel=False),
    "quantize_static-qdq-contrib": lambda: producers.static_quantized(13, contrib=True),
    "quantize_static-qoperator": lambda: qoperator("u8", True),
    "quantize_dynamic": lambda: producers.dynamic_quantized(13),
    "matmul_nbits-quantizer": lambda: published.quantizer_nbits(56, 32, False, 4),
}


def _initializers(model: onnx.ModelProto) -> dict[str, bytes]:
    return {t.name: t.SerializeToString() for t in model.graph.initializer}


@pytest.mark.parametrize("producer", PRODUCERS)
def test_lower_of_convert_gives_the_initializers_back_byte_for_byte(producer: str) -> None:
    """The default (dynamic) conversion. convert(static=True) keeps scales as attributes of the
    static spec ops: lowering writes new "<node>_scale" initializers (values kept, not names)."""
    original = PRODUCERS[producer]()
    typed = [t.name for t in original.graph.initializer if not t.HasField("raw_data")]
    assert typed or producer == "matmul_nbits-quantizer"  # the case this is about
    converted = quantgraph.convert(original).proto
    back = quantgraph.lower(converted).proto
    assert _initializers(back) == _initializers(original)


def _one_channel_qdq() -> onnx.ModelProto:
    """A per-channel s8 Conv weight with one output channel: DequantizeLinear(axis=0) with its
    scale and zero point of shape [1] (what quantize_static writes for such a layer)."""
    weight = numpy_helper.from_array(np.array([[[[3]], [[-7]], [[5]]]], np.int8), "w_q")
    scale = numpy_helper.from_array(np.array([0.02], np.float32), "w_scale")
    zero = numpy_helper.from_array(np.array([0], np.int8), "w_zero_point")
    graph = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero_point"], ["w"], axis=0),
            helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
        ],
        "one_channel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])],
        [weight, scale, zero],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


ONE_CHANNEL: dict[str, Callable[[], onnx.ModelProto]] = {
    # found by tools.fuzz.formats (qoperator, seed 5): lowered with new scalar initializers
    # w_scale_scalar / w_zero_point_scalar in place of the original's [1]-shaped ones
    "fuzz-qoperator-12335": lambda: rebuild("qoperator", 12335).model,
    "qdq-axis-0": _one_channel_qdq,
}


@pytest.mark.parametrize("producer", ONE_CHANNEL)
def test_a_one_channel_weight_gets_its_own_one_element_initializers_back(producer: str) -> None:
    """A one-element 1-D scale converts to a per_tensor spec op; lowering gives the original's
    [1]-shaped scale and zero point back as they were (ONNX reads them per-axis on a dimension
    of size 1: the same values), not scalar copies under new names."""
    original = ONE_CHANNEL[producer]()
    assert any(list(t.dims) == [1] for t in original.graph.initializer)
    converted = quantgraph.convert(original).proto
    back = quantgraph.lower(converted).proto
    assert _initializers(back) == _initializers(original)
    assert _nodes(back) == _nodes(original)


def _nodes(model: onnx.ModelProto) -> list[tuple[object, ...]]:
    """Not the protos themselves: a builder may write ``domain: ""`` explicitly."""
    return [
        (n.op_type, n.domain, n.name, list(n.input), list(n.output), list(n.attribute))
        for n in model.graph.node
    ]
