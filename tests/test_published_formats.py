"""Published weight-only formats (issue #34): com.microsoft MatMulNBits as onnxruntime's
MatMulNBitsQuantizer writes it by default (QOperator) and as hand-built nodes for the rows it
does not write. Each converts to a per_group DynamicDequantize -> MatMul, computes what
onnxruntime computes for the original (the dequantized weight bit for bit; the outputs too where
the original kernel sums in float), lowers back to the same MatMulNBits with the same bytes, and
the report lists what was converted or why not.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto

import quantgraph
from quantgraph.cli import main
from quantgraph.passes import SKIP_CODES
from quantgraph.testing import ort_session, quiet_session_options
from tests import published
from tests.builders import requires_native
from tests.lowering import assert_lowers_to_the_original, initializer_bytes

pytestmark = requires_native

QUANTIZER = [  # (K, block, symmetric, bits): K = 56 with 32 is a short last block
    (64, 16, True, 4),
    (56, 32, False, 4),
    (56, 32, True, 4),
    (128, 128, False, 4),
    (64, 32, True, 8),
    (56, 16, False, 8),
]
QUANTIZER_IDS = [f"k{k}-b{b}-{'sym' if s else 'asym'}-{bits}bit" for k, b, s, bits in QUANTIZER]


def _original(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(v) for v in ort_session(model).run(None, feeds)]


def _converted(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = quantgraph.InferenceSession(model, "native")
    return [np.asarray(v) for v in session.run(None, feeds)]


@pytest.mark.parametrize(("k", "block", "symmetric", "bits"), QUANTIZER, ids=QUANTIZER_IDS)
def test_quantizer_models_convert_validate_exactly_and_lower_back(
    k: int, block: int, symmetric: bool, bits: int
) -> None:
    original = published.quantizer_nbits(k, block, symmetric, bits)
    assert {n.op_type for n in original.graph.node} == {"MatMulNBits", "Relu"}
    result = quantgraph.convert(original)
    assert result.report.converted == {"MatMulNBits": 2}
    assert result.report.skipped == [] and result.report.other_quantized == []
    kinds = [n.op_type for n in result.proto.graph.node]
    assert "MatMulNBits" not in kinds and kinds.count("DynamicDequantize") == 2
    signed = "s" if symmetric else "u"
    assert all(
        n.detail.startswith(f"{signed}{bits}, per_group [{block}, 1]")
        for n in result.report.converted_nodes
    )
    batch = {"batch": 4}
    report = quantgraph.validate(original, result.proto, backend="native", iterations=2, dims=batch)
    assert report.agree, report.to_dict()
    # One row: onnxruntime's MatMulNBits takes its GEMV path, which sums in another order
    # than MatMul (measured here: at most 2.4e-7 apart); validation judges by its stated bound.
    one_row = quantgraph.validate(original, result.proto, backend="native", dims={"batch": 1})
    assert one_row.agree and not one_row.exact_expected, one_row.to_dict()
    assert_lowers_to_the_original(original, result.proto)


@pytest.mark.parametrize(
    "rows",
    [
        {},
        {"zero_points": "packed"},
        {"zero_points": "packed", "bits": 8},
        {"bits": 8},
        {"bias": True},
        {"flat_scales": True, "zero_points": "packed"},
        {"dtype": TensorProto.FLOAT16, "zero_points": "packed", "bias": True},
        {"dtype": TensorProto.FLOAT16},
        {"zero_points": "typed"},
        {"g_idx": "identity"},
        {"accuracy_level": 4, "k": 256},
    ],
    ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()) or "plain",
)
def test_hand_built_rows(rows: dict[str, object]) -> None:
    """The dequantized weight (A = identity) is what MatMulNBits dequantizes, bit for bit,
    except where onnxruntime's kernel computes q*s - zp*s (float zero points, any g_idx; measured
    on onnxruntime 1.32): there within a rounding of (q - zp)*s, the op's own formula."""
    original = published.matmul_nbits(**rows)  # type: ignore[arg-type]
    k = next(a.i for a in original.graph.node[0].attribute if a.name == "K")
    f16 = rows.get("dtype") == TensorProto.FLOAT16
    np_type = np.float16 if f16 else np.float32
    result = quantgraph.convert(original)
    assert result.report.converted == {"MatMulNBits": 1}, result.report.to_dict()
    converted = result.proto
    eye = {"x": np.eye(k, dtype=np_type)[None]}
    if rows.get("bias"):  # the bias is added after the product: take it off both sides
        bias = np.asarray(onnx.numpy_helper.to_array(original.graph.initializer[-1]))
        want, got = _original(original, eye)[0] - bias, _converted(converted, eye)[0] - bias
    else:
        want, got = _original(original, eye)[0], _converted(converted, eye)[0]
    one_rounding = rows.get("zero_points") == "typed" or "g_idx" in rows
    if rows.get("accuracy_level") == 4 or one_rounding:
        # q*s and zp*s each rounded once: apart by a rounding of the largest weight's size
        bound = 2 * float(np.spacing(np.abs(want).max()))
        assert 0 < np.abs(want.astype(np.float64) - got).max() <= bound
    elif not rows.get("bias"):
        np.testing.assert_array_equal(got, want)
    x = {"x": np.random.default_rng(k).standard_normal((2, 3, k)).astype(np_type)}
    original_x, converted_x = _original(original, x)[0], _converted(converted, x)[0]
    outputs = np.abs(original_x.astype(np.float64) - converted_x)
    if rows.get("accuracy_level") == 4:  # int8 A inside onnxruntime's kernel
        assert 0 < outputs.max() < 0.05
    elif f16:  # float16 products summed in another order
        assert outputs.max() <= 4e-3
    elif not one_rounding:  # the kernel's summation order is the CPU's: a derived bound
        weight = _converted(converted, eye)[0][0] - (bias if rows.get("bias") else 0)
        published.assert_summed_in_another_order(converted_x, original_x, x["x"], weight)
    assert_lowers_to_the_original(original, converted)


@pytest.mark.parametrize(
    ("rows", "code"),
    [
        ({"g_idx": "shuffled"}, "act-order"),
        ({"zero_points": "fractional"}, "float-zero-point"),
        # found by tools.fuzz.formats: onnxruntime's g_idx kernel reads packed zero points
        # otherwise than its kernel without g_idx (outputs ~2 apart, onnxruntime 1.32)
        ({"g_idx": "identity", "zero_points": "packed"}, "act-order"),
    ],
)
def test_refused_rows_stay_with_a_code(rows: dict[str, str], code: str) -> None:
    original = published.matmul_nbits(**rows)  # type: ignore[arg-type]
    result = quantgraph.convert(original)
    assert [(s.node, s.op_type, s.code) for s in result.report.skipped] == [
        ("mm", "MatMulNBits", code)
    ]
    assert code in SKIP_CODES
    assert [n.op_type for n in result.proto.graph.node] == ["MatMulNBits"]
    x = {"x": np.random.default_rng(0).standard_normal((1, 2, 56)).astype(np.float32)}
    np.testing.assert_array_equal(_converted(result.proto, x)[0], _original(original, x)[0])


def test_accuracy_level_4_originals_differ_by_their_int8_activations_only() -> None:
    """Measured, onnxruntime 1.32: with accuracy_level 4 MatMulNBits quantizes A to int8 per
    block; the converted model computes the float product (what accuracy_level 0 gives)."""
    original = published.matmul_nbits(k=256, accuracy_level=4)
    float_twin = published.matmul_nbits(k=256)
    converted = quantgraph.convert(original).proto
    x = {"x": np.random.default_rng(3).standard_normal((2, 3, 256)).astype(np.float32)}
    weight = _converted(converted, {"x": np.eye(256, dtype=np.float32)[None]})[0][0]
    got, twin = _converted(converted, x)[0], _original(float_twin, x)[0]
    published.assert_summed_in_another_order(got, twin, x["x"], weight)
    assert np.abs(got - _original(original, x)[0]).max() > np.abs(got - twin).max()


def test_enable_all_with_onnxruntime_fusion_equals_the_original_at_enable_all() -> None:
    """Accuracy level unset: the converted weight and a float MatMul at ORT_ENABLE_ALL give the
    original's ORT_ENABLE_ALL outputs bit for bit."""
    original = published.quantizer_nbits(56, 32, False)
    converted = quantgraph.convert(original).proto
    session = quantgraph.InferenceSession(converted, "native", fusion="onnxruntime")
    options = quiet_session_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    x = {"x": np.random.default_rng(5).standard_normal((4, 56)).astype(np.float32)}
    want = ort_session(original, options).run(None, x)[0]
    np.testing.assert_array_equal(session.run(None, x)[0], want)


def test_cli_convert_validate_lower_and_json(tmp_path: Path) -> None:
    source, converted, lowered = tmp_path / "q4.onnx", tmp_path / "c.onnx", tmp_path / "l.onnx"
    original = published.quantizer_nbits(56, 32, True)
    onnx.save(original, source)
    runner = CliRunner()
    done = runner.invoke(main, ["convert", str(source), str(converted), "--json"])
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert payload["converted"] == {"MatMulNBits": 2}
    assert payload["emitted"] == {"DynamicDequantize": 2}
    assert [n["node"] for n in payload["nodes"]] == ["mm1_Q4", "mm2_Q4"]
    text = runner.invoke(main, ["convert", str(source), str(tmp_path / "t.onnx")])
    assert "MatMulNBits" in text.stdout, text.stdout
    two_rows = ["--dim", "batch=2"]  # one row takes MatMulNBits' GEMV path (another sum order)
    checked = runner.invoke(
        main, ["validate", str(source), str(converted), "--backend", "native", *two_rows]
    )
    assert checked.exit_code == 0, checked.output
    back = runner.invoke(main, ["lower", str(converted), str(lowered), "--json"])
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout)["emitted"] == {"MatMulNBits": 2}
    assert initializer_bytes(onnx.load(lowered)) == initializer_bytes(original)


def test_lower_to_qdq_writes_the_blocked_dequantize_form() -> None:
    original = published.quantizer_nbits(56, 32, False)
    converted = quantgraph.convert(original).proto
    lowered = quantgraph.lower(converted, to_qdq=True).proto
    kinds = [n.op_type for n in lowered.graph.node]
    assert kinds == ["DequantizeLinear", "MatMul", "Relu", "DequantizeLinear", "MatMul"]
    x = {"x": np.random.default_rng(2).standard_normal((3, 56)).astype(np.float32)}
    np.testing.assert_array_equal(_original(lowered, x)[0], _original(original, x)[0])


@pytest.mark.parametrize(
    "rows",
    [
        {},
        {"zero_points": "packed"},
        {"bits": 8},
        {"accuracy_level": 0},
        {"dtype": TensorProto.FLOAT16},
        {"bias": True},
        {"accuracy_level": 4, "k": 256},
    ],
    ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()) or "plain",
)
def test_fusion_onnxruntime_runs_the_original_matmul_nbits(rows: dict[str, object]) -> None:
    """Found by tools.fuzz.formats (matmul_nbits seeds 10683, 512, 990990979): the plan folded
    the dequantize back into MatMulNBits to read onnxruntime's graph, then listed it nowhere
    and handed the session the spec op (4-bit Q/DQ needs opset 21; these models are 17), so
    MatMul ran where the original runs MatMulNBits (one row: its GEMV path, 1e-7..5e-6 apart).
    Now it is a unit given back as the original's MatMulNBits: identical at ORT_ENABLE_ALL for
    every row (accuracy_level 4, float16, bias too); unfused, validation judges them by a bound
    the model gives, accuracy_level 4 against the original at accuracy_level 0."""
    original = published.matmul_nbits(**rows)  # type: ignore[arg-type]
    k = next(a.i for a in original.graph.node[0].attribute if a.name == "K")
    converted = quantgraph.convert(original).proto
    session = quantgraph.InferenceSession(converted, "native", fusion="onnxruntime")
    plan = session.fusion_plan
    spec = {n.name for n in converted.graph.node if n.domain == "com.quantgraph"}
    covered = [n for u in plan.units for n in u.nodes] + [a.node for a in plan.alone]
    assert sorted(covered) == sorted(spec)
    (unit,) = plan.units
    assert (unit.op_type, unit.kernel) == ("MatMul", "com.microsoft.MatMulNBits")
    assert "MatMulNBits" in unit.reason
    options = quiet_session_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    np_type = np.float16 if rows.get("dtype") == TensorProto.FLOAT16 else np.float32
    for shape in [(1, 1, k), (2, 3, k)]:  # one row: the GEMV path
        x = {"x": np.random.default_rng(k).standard_normal(shape).astype(np_type)}
        want = ort_session(original, options).run(None, x)[0]
        np.testing.assert_array_equal(session.run(None, x)[0], want)
    fused = quantgraph.validate(original, converted, backend="native", fusion="onnxruntime")
    assert fused.agree and fused.exact_expected, fused.to_dict()
    unfused = quantgraph.validate(original, converted, backend="native", iterations=3)
    assert not unfused.exact_expected and "MatMulNBits" in unfused.comparison
    # every row agrees with its like-with-like reference, within the bound the model gives
    assert unfused.agree and unfused.bound is not None, unfused.to_dict()
    assert unfused.tolerance == (0.0, 0.0)
    level = rows.get("accuracy_level")
    if not level:
        assert unfused.like_reference is None and unfused.as_run == []
        return
    # accuracy_level 4: against the original at accuracy_level 0; the int8-activation original
    # beside the verdict, further than the bound
    assert unfused.comparison.startswith(
        "original [a copy in memory: accuracy_level 0 on 1 MatMulNBits node (was 4)]"
    )
    (beside,) = unfused.as_run
    (output,) = unfused.outputs
    assert beside.max_abs_diff > unfused.bound.atol(output.name) > output.max_abs_diff
