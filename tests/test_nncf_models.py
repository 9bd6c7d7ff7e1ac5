"""Models quantized by NNCF (its ONNX backend), a producer other than onnxruntime's: they
convert, validate exactly with and without fusion, lower back to the same Q/DQ, and their
fusion sessions run onnxruntime's fused kernels for the units."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import quantgraph
from quantgraph.testing import ort_session, quiet_session_options
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


def test_mixed_preset_detector_is_the_original_at_enable_all(tmp_path: Path) -> None:
    """A PaddleOCR-style detector through NNCF's mixed preset, weights through Constant nodes
    (issue #42, item 11): onnxruntime quantizes the float bias of each Conv between a
    DequantizeLinear and a QuantizeLinear that no integer kernel takes (u8 in, s8 out; s8 in),
    and places its layout Transposes by the Q/DQ around them, though it leaves those Q/DQ as
    they are. Fusion "onnxruntime" hands onnxruntime the same graph: what it runs is, node for
    node, what it runs for the original (whatever kernels this CPU gets), and the outputs are
    the original's at ORT_ENABLE_ALL bit for bit."""
    model = producers.nncf_detector()
    made = {out: n for n in model.graph.node for out in n.output}
    quantized_inputs = {
        n.name: made[n.input[0]].op_type == "DequantizeLinear"
        for n in model.graph.node
        if n.op_type == "Conv"
    }
    assert True in quantized_inputs.values() and False in quantized_inputs.values()
    weights = [n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in made]
    assert any(made[n.input[0]].op_type == "Constant" for n in weights)
    assert {"HardSigmoid", "Resize", "Sigmoid"} <= {n.op_type for n in model.graph.node}
    converted = quantgraph.convert(model).proto

    options = quiet_session_options(optimize=True)
    options.optimized_model_filepath = str(tmp_path / "original.onnx")
    original = ort_session(model, options)
    options = quiet_session_options(optimize=True)
    options.optimized_model_filepath = str(tmp_path / "session.onnx")
    session = quantgraph.InferenceSession(
        converted, "native", options=options, fusion="onnxruntime"
    )
    assert _graph_form(tmp_path / "session.onnx") == _graph_form(tmp_path / "original.onnx")
    for seed in range(3):
        feeds = make_inputs(model, seed=seed)
        for want, got in zip(original.run(None, feeds), session.run(None, feeds), strict=True):
            np.testing.assert_array_equal(want, got)
    report = quantgraph.validate(model, converted, fusion="onnxruntime", iterations=2)
    assert report.agree and report.exact_expected, report.to_dict()


def _graph_form(path: Path) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """Every node of an optimized model as (kind, inputs, outputs), spec ops as the Q/DQ they
    stand for and Q/DQ by their data input (the converter writes scales of its own), constants
    by value (onnxruntime shares equal ones under the name it meets first)."""
    as_qdq = {"DynamicQuantize": "QuantizeLinear", "DynamicDequantize": "DequantizeLinear"}
    model = onnx.load(path)
    values = {
        t.name: f"{t.data_type}{list(t.dims)}:{onnx.numpy_helper.to_array(t).tobytes().hex()}"
        for t in model.graph.initializer
    }
    form = []
    for node in model.graph.node:
        kind = as_qdq.get(node.op_type, f"{node.domain}:{node.op_type}".lstrip(":"))
        inputs = node.input[:1] if kind in as_qdq.values() else node.input
        form.append((kind, tuple(values.get(i, i) for i in inputs), tuple(node.output)))
    return sorted(form)
