"""``lower(convert(m))`` gives back every initializer of ``m`` byte for byte (TensorProto
SerializeToString): scalar scales and zero points that quantize_static writes in float_data /
int32_data come back in those fields, not as raw_data (the same values, another encoding)."""

from __future__ import annotations

from collections.abc import Callable

import onnx
import pytest

import quantgraph
from tests import producers, published
from tests.qoperator_models import qoperator

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
