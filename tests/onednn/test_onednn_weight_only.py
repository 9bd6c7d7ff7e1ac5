"""Int4 weight-only models (onnxruntime's MatMulNBitsQuantizer, QDQ format) on oneDNN: per_group
DynamicDequantize of s4/u4 weights. oneDNN v3.7+ runs them (measured on v3.13.2: every output
identical to the ONNX original); older ones refuse per_group, naming the node."""

from __future__ import annotations

import pytest
from onnx import TensorProto

import quantgraph
from quantgraph.backends import onednn
from quantgraph.validation import validate
from tests.builders import requires_onednn
from tests.test_weight_only import quantized

pytestmark = requires_onednn


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_int4_weights_on_onednn(symmetric: bool, dtype: int) -> None:
    model = quantized(symmetric, 32, dtype)
    rewritten = quantgraph.convert(model).proto
    if onednn.version_tuple() < (3, 7, 0):
        with pytest.raises(Exception, match=r"DynamicDequantize node '.*'.*refused per_group"):
            validate(model, rewritten, backend="onednn")
        return
    report = validate(model, rewritten, backend="onednn", iterations=2)
    assert all(o.mismatches == 0 for o in report.outputs), report.to_dict()
