"""quantize_dynamic's integer ops (issue #34): MatMulInteger / ConvInteger and their Cast -> Mul
scale chain become DynamicDequantize of both operands and a float MatMul / Conv. The rewritten
model sums in float32 where the original sums in int32, so validation is judged by a stated
bound (measured here); lower gives the original nodes back with the same bytes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.fusion.ort import ort_engine
from quantgraph.testing import ort_session, quiet_session_options
from tests import producers
from tests.builders import requires_native
from tests.lowering import assert_lowers_to_the_original

pytestmark = requires_native


def _quantize_dynamic(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    from onnxruntime.quantization import quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder, "float.onnx"), Path(folder, "dynamic.onnx")
        onnx.save(model, source)
        quantize_dynamic(source, target, **options)
        return onnx.load(target)


def _options(name: str) -> dict[str, Any]:
    from onnxruntime.quantization import QuantType

    return {
        "defaults": {},
        "per_channel": {"per_channel": True},
        "per_channel-u8": {"per_channel": True, "weight_type": QuantType.QUInt8},
        "reduce_range-u8": {"reduce_range": True, "weight_type": QuantType.QUInt8},
        "reduce_range-per_channel": {"reduce_range": True, "per_channel": True},
        "const_b_only": {"extra_options": {"MatMulConstBOnly": True}},
        "u8": {"weight_type": QuantType.QUInt8},
    }[name]


CASES = [  # (float model, options, converted counts)
    ("mlp", "defaults", {"MatMulInteger": 2}),
    ("mlp", "per_channel", {"MatMulInteger": 2}),
    ("mlp", "per_channel-u8", {"MatMulInteger": 2}),
    ("mlp", "reduce_range-u8", {"MatMulInteger": 2}),
    ("mlp", "const_b_only", {"MatMulInteger": 2}),
    ("cnn", "defaults", {"ConvInteger": 1, "MatMulInteger": 1}),
    ("cnn", "u8", {"ConvInteger": 1, "MatMulInteger": 1}),
    ("cnn", "reduce_range-per_channel", {"ConvInteger": 1, "MatMulInteger": 1}),
]


def _vnni() -> bool:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "avx512_vnni" in flags or "avx_vnni" in flags


def _float(name: str) -> onnx.ModelProto:
    return producers.mlp(16) if name == "mlp" else producers.cnn(13)


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    found = {}
    for graph_input in model.graph.input:
        dims = [d.dim_value or 4 for d in graph_input.type.tensor_type.shape.dim]
        found[graph_input.name] = rng.standard_normal(dims).astype(np.float32)
    return found


@pytest.mark.parametrize(
    ("model", "options", "counts"), CASES, ids=[f"{m}-{o}" for m, o, _ in CASES]
)
def test_quantize_dynamic_models_convert_validate_by_the_bound_and_lower_back(
    model: str, options: str, counts: dict[str, int]
) -> None:
    original = _quantize_dynamic(_float(model), **_options(options))
    result = quantgraph.convert(original)
    report = result.report
    assert report.converted == {**counts, "DynamicQuantizeLinear": 2}
    assert report.skipped == [] and report.other_quantized == []
    kinds = {n.op_type for n in result.proto.graph.node}
    assert not kinds & {"MatMulInteger", "ConvInteger"}
    per_channel = "per_channel" in options
    for node in report.converted_nodes:
        if node.op_type == "MatMulInteger":
            assert ("per_channel axis 1" in node.detail) == per_channel, node.detail
    validation = quantgraph.validate(original, result.proto, backend="native", iterations=3)
    assert not validation.exact_expected
    assert validation.bound is not None and validation.tolerance == (0.0, 0.0)
    assert "not expected to be exact" in validation.comparison
    assert validation.agree, validation.to_dict()
    # Measured: at most 4.8e-7 apart (outputs up to ~3 in magnitude).
    assert all(o.max_abs_diff < 2e-6 for o in validation.outputs), validation.to_dict()
    assert_lowers_to_the_original(original, result.proto)


@pytest.mark.parametrize(
    ("model", "options", "counts"), CASES, ids=[f"{m}-{o}" for m, o, _ in CASES]
)
def test_enable_all_with_onnxruntime_fusion_is_the_original(
    model: str, options: str, counts: dict[str, int]
) -> None:
    """With fusion "onnxruntime" each MatMulInteger/ConvInteger and its scale chain goes back to
    onnxruntime as the original's (with its DynamicQuantizeLinear), so onnxruntime fuses them as
    for the original (DynamicQuantizeMatMul...): bit for bit the original at ORT_ENABLE_ALL,
    full-range s8 weights on a CPU without VNNI too (both sides saturate in the same kernel).
    Before, DequantizeLinear -> MatMul/Conv in float: up to 0.28 apart there (per_channel)."""
    original = _quantize_dynamic(_float(model), **_options(options))
    converted = quantgraph.convert(original).proto
    enabled = ort_session(original, quiet_session_options(optimize=True))
    fused = quantgraph.InferenceSession(converted, "native", fusion="onnxruntime")
    chains = [u for u in fused.fusion_plan.units if u.op_type in ("MatMul", "Conv")]
    assert len(chains) == sum(counts.values())
    for unit in chains:
        assert unit.reason.startswith("the original's ") and "scale chain" in unit.reason
    for seed in range(8):
        feeds = _feeds(original, seed)
        want = np.asarray(enabled.run(None, feeds)[0])
        np.testing.assert_array_equal(np.asarray(fused.run(None, feeds)[0]), want)
    report = quantgraph.validate(
        original, converted, backend="native", fusion="onnxruntime", iterations=2
    )
    assert report.exact_expected and report.agree, report.to_dict()
    assert not report.integer_sums
    assert report.comparison.endswith("both at ORT_ENABLE_ALL: must be identical")


def _two_activations() -> onnx.ModelProto:
    """y = a @ b with both operands graph inputs (what attention's Q @ K^T is)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="qk")],
        "qk",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [8, 6]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_both_operands_dynamic_without_matmul_const_b_only() -> None:
    """This onnxruntime's quantize_dynamic defaults to MatMulConstBOnly (a MatMul of two
    activations stays float); with it off, both operands get a DynamicQuantizeLinear."""
    assert "MatMulInteger" not in {
        n.op_type for n in _quantize_dynamic(_two_activations()).graph.node
    }
    original = _quantize_dynamic(_two_activations(), extra_options={"MatMulConstBOnly": False})
    assert [n.op_type for n in original.graph.node].count("DynamicQuantizeLinear") == 2
    result = quantgraph.convert(original)
    assert result.report.converted == {"DynamicQuantizeLinear": 2, "MatMulInteger": 1}
    (node,) = [n for n in result.report.converted_nodes if n.op_type == "MatMulInteger"]
    assert node.detail.count("from its DynamicQuantizeLinear") == 2, node.detail
    report = quantgraph.validate(original, result.proto, backend="native", iterations=3)
    assert report.agree, report.to_dict()
    assert_lowers_to_the_original(original, result.proto)


def test_an_integer_op_without_the_scale_chain_stays_with_its_reason() -> None:
    """MatMulInteger whose int32 result is a graph output: no scale chain to fold."""
    weight = numpy_helper.from_array(np.ones((8, 6), np.int8), "w")
    graph = helper.make_graph(
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dql"),
            helper.make_node("MatMulInteger", ["q", "w", "z"], ["y"], name="mmi"),
        ],
        "bare",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [4, 6])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    result = quantgraph.convert(model)
    (skipped,) = result.report.skipped
    assert (skipped.node, skipped.code) == ("mmi", "scale-chain")
    assert result.report.other_quantized == []
    report = quantgraph.validate(model, result.proto, backend="native")
    assert report.exact_expected and report.agree


def _one_matmul() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    weight = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("per_channel", [False, True])
def test_the_spec_form_is_the_float_sum_of_the_dequantized_operands(per_channel: bool) -> None:
    """Independent reference: numpy's float64 (a - za) sa @ (w - zw) sw, from the original's
    own quantized weight and DynamicQuantizeLinear's rule, is within float32 rounding of both."""
    original = _quantize_dynamic(_one_matmul(), per_channel=per_channel)
    converted = quantgraph.convert(original).proto
    stored = {t.name: numpy_helper.to_array(t) for t in original.graph.initializer}
    feeds = _feeds(original, 5)
    x = feeds["x"]
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    sa = np.float32(np.float32(hi - lo) / np.float32(255))
    za = np.float32(np.clip(np.round(np.float32(0) - np.float32(lo) / sa), 0, 255))
    a = np.clip(np.round(x / sa) + za, 0, 255).astype(np.float64)
    w = stored["w_quantized"].astype(np.float64) - stored["w_zero_point"].astype(np.float64)
    want = ((a - za) * float(sa)) @ (w * stored["w_scale"].astype(np.float64))
    got = np.asarray(quantgraph.InferenceSession(converted, "native").run(None, feeds)[0])
    reference = np.asarray(ort_session(original).run(None, feeds)[0])
    scale = float(np.abs(want).max())
    assert np.abs(got - want).max() <= 1e-6 * scale
    assert np.abs(reference - want).max() <= 1e-6 * scale


def test_onnxruntimes_u8s8_kernel_saturates_without_vnni_where_the_spec_form_does_not() -> None:
    """255 * 127 + 255 * 127 = 64770: onnxruntime's AVX2 u8 x s8 kernel adds pairs of products
    in int16 (vpmaddubsw) and gives 32767; with VNNI it gives 64770. quantize_dynamic's
    reduce_range (7-bit weights) exists for this. The spec form sums in float: 64770 always."""
    weight = numpy_helper.from_array(np.full((2, 1), 127, np.int8), "w")
    scale = numpy_helper.from_array(np.array(1.0, np.float32), "sw")
    graph = helper.make_graph(
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dql"),
            helper.make_node("Mul", ["s", "sw"], ["ss"], name="scales"),
            helper.make_node("MatMulInteger", ["q", "w", "z"], ["i"], name="mmi"),
            helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT, name="cast"),
            helper.make_node("Mul", ["f", "ss"], ["y"], name="out"),
        ],
        "pair",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        [weight, scale],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = {"x": np.full((1, 2), 255.0, np.float32)}  # scale 1, zero point 0, q = 255
    original = float(np.asarray(ort_session(model).run(None, x)[0]).item())
    assert original == (64770.0 if _vnni() else 32767.0)
    converted = quantgraph.convert(model).proto
    got = np.asarray(quantgraph.InferenceSession(converted, "native").run(None, x)[0])
    assert got.item() == 64770.0


def test_the_onnxruntime_plan_names_the_kernels_that_run_the_integer_units() -> None:
    """quantize_dynamic's CNN: onnxruntime keeps ConvInteger with its scale chain, and fuses
    DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add into one DynamicQuantizeMatMul
    writing the Add's output (not "folded away")."""
    converted = quantgraph.convert(producers.dynamic_quantized()).proto
    plan = ort_engine.plan(ir.from_proto(converted), 99)
    kernels = {u.op_type: u.kernel for u in plan.units if u.op_type in ("Conv", "MatMul")}
    assert kernels == {
        "Conv": "ConvInteger (then its Cast -> Mul scale chain)",
        "MatMul": "com.microsoft.DynamicQuantizeMatMul (with the Add after it)",
    }
