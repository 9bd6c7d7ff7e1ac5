"""Models quantized by NNCF (its ONNX backend), a producer other than onnxruntime's: they
convert, validate exactly with and without fusion, lower back to the same Q/DQ, and their
fusion sessions run onnxruntime's fused kernels for the units."""

from __future__ import annotations

import numpy as np
import pytest

import quantgraph
from quantgraph.testing import ort_session
from quantgraph.validation import make_inputs
from tests import producers
from tests.builders import requires_native

pytestmark = requires_native

ARCHS = ["cnn", "mlp"]


@pytest.mark.parametrize("arch", ARCHS)
def test_nncf_models_convert_and_validate_exactly(arch: str) -> None:
    model = producers.nncf_quantized(arch)
    result = quantgraph.convert(model)
    assert result.report.converted and not result.report.skipped, result.report.to_dict()
    dims = {"batch": 3} if arch == "mlp" else None
    for fusion in ("none", "onnxruntime"):
        report = quantgraph.validate(model, result.proto, fusion=fusion, iterations=3, dims=dims)
        assert report.agree and report.exact_expected, report.to_dict()
        assert all(o.mismatches == 0 for o in report.outputs)


@pytest.mark.parametrize("arch", ARCHS)
def test_nncf_models_lower_back_to_their_qdq(arch: str) -> None:
    model = producers.nncf_quantized(arch)
    back = quantgraph.lower(quantgraph.convert(model).proto).proto
    kinds = sorted((n.domain, n.op_type) for n in back.graph.node)
    assert kinds == sorted((n.domain, n.op_type) for n in model.graph.node)
    feeds = make_inputs(model, seed=1, dims={"batch": 2} if arch == "mlp" else None)
    want = ort_session(model).run(None, feeds)
    got = ort_session(back).run(None, feeds)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_nncf_cnn_fuses_into_qlinearconv() -> None:
    converted = quantgraph.convert(producers.nncf_quantized("cnn")).proto
    session = quantgraph.InferenceSession(converted, "native", fusion="onnxruntime")
    kernels = {u.kernel for u in session.fusion_plan.units}
    assert "com.microsoft.QLinearConv" in kernels, session.fusion_plan.to_dict()


@pytest.mark.parametrize("preset", ["performance", "mixed"])
def test_weights_through_constant_nodes_fuse_exactly(preset: str) -> None:
    """NNCF quantizes float weights that arrive as Constant nodes in the graph (Constant ->
    QuantizeLinear -> DequantizeLinear -> Conv): fusion "onnxruntime" equals the original at
    ORT_ENABLE_ALL bit for bit (issue #33, item 5), and fusion "none" the spec composition."""
    model = producers.nncf_constant_weights(preset)
    prod = {out: n for n in model.graph.node for out in n.output}
    quantized = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert any(n.input[0] in prod and prod[n.input[0]].op_type == "Constant" for n in quantized), (
        "NNCF no longer quantizes Constant weights in the graph"
    )
    converted = quantgraph.convert(model).proto
    for fusion in ("none", "onnxruntime"):
        report = quantgraph.validate(model, converted, fusion=fusion, iterations=4)
        assert report.agree and report.exact_expected, report.to_dict()
        assert all(o.mismatches == 0 for o in report.outputs)
