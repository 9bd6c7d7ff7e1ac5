"""ONNX OpSchemas of the custom domain: checker, strict shape inference, ReferenceEvaluator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, defs, helper
from onnx.reference import ReferenceEvaluator

from quantgraph import reference
from quantgraph.ir import onnx_schemas as schemas
from quantgraph.spec import DOMAIN, OPS, OPSET_VERSION, dtypes
from tests.builders import (
    EVERY_BACKEND,
    Operand,
    graph_input,
    run_evaluator,
    run_quantgraph,
    spec_op_model,
)

F32 = np.float32
Shape = Sequence[int | str | None] | None


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    schemas.register()


def op_model(
    op: str,
    inputs: Sequence[tuple[str, int, Shape]],
    attributes: dict[str, Any] | None = None,
    initializers: Sequence[onnx.TensorProto] = (),
    node_name: str = "node0",
) -> onnx.ModelProto:
    """src/scales/zps graph inputs (or initializers) -> op -> dst -> Cast(float) -> out.

    The graph output is the Cast's, so dst's type and shape are left for inference to find.
    ``inputs`` in the op's order; an input named "" is left empty.
    """
    constants = {t.name: t for t in initializers}
    operands: list[Operand] = [
        constants.get(name, (elem, shape)) if name else "" for name, elem, shape in inputs
    ]
    return spec_op_model(op, *operands, float_output=True, name=node_name, **(attributes or {}))


def inferred_dst(model: onnx.ModelProto) -> onnx.TypeProto:
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    found: list[onnx.TypeProto] = [v.type for v in inferred.graph.value_info if v.name == "dst"]
    assert len(found) == 1, inferred.graph.value_info
    return found[0]


def inferred_dst_or_none(model: onnx.ModelProto) -> onnx.TypeProto | None:
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    found = [v.type for v in inferred.graph.value_info if v.name == "dst"]
    return found[0] if found else None


def dims(type_proto: onnx.TypeProto) -> list[int | str | None]:
    shape: list[int | str | None] = []
    for d in type_proto.tensor_type.shape.dim:
        shape.append(d.dim_value if d.HasField("dim_value") else d.dim_param or None)
    return shape


def inference_error(model: onnx.ModelProto) -> str:
    """The message of the error that check_model(full_check) / strict inference raises."""
    with pytest.raises((onnx.shape_inference.InferenceError, onnx.checker.ValidationError)) as e:
        onnx.checker.check_model(model, full_check=True)
    with pytest.raises(onnx.shape_inference.InferenceError) as strict:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    assert str(e.value).strip() and str(strict.value).strip()
    return str(strict.value)


# ------------------------------------------------------------------------------------------
# registration
# ------------------------------------------------------------------------------------------


def test_register_is_idempotent() -> None:
    for _ in range(3):
        schemas.register()
    found = schemas.schemas()
    assert [s.name for s in found] == list(OPS)
    for schema in found:
        assert schema.domain == DOMAIN
        assert schema.since_version == OPSET_VERSION
        assert defs.has(schema.name, OPSET_VERSION, DOMAIN)
    names = [s.name for s in defs.get_all_schemas_with_history() if s.domain == DOMAIN]
    assert sorted(names) == sorted(OPS), "each op registered exactly once"


def test_register_is_thread_safe() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: schemas.register(), range(16)))
    assert sum(1 for s in defs.get_all_schemas_with_history() if s.domain == DOMAIN) == len(OPS)


def test_schema_attributes_and_type_constraints_follow_the_spec() -> None:
    for op in OPS.values():
        schema = defs.get_schema(op.name, OPSET_VERSION, DOMAIN)
        assert set(schema.attributes) == {a.name for a in op.attributes}
        qtype = schema.attributes["qtype"]
        assert not qtype.required
        assert helper.get_attribute_value(qtype.default_value) == b"per_tensor"
        axis = schema.attributes["axis"]
        assert not axis.required
        assert helper.get_attribute_value(axis.default_value) == 1
        if op.is_static:
            assert schema.attributes["scales"].required
            assert not schema.attributes["zps"].required
        assert [i.name for i in schema.inputs] == [a.name for a in op.inputs]
        options = [i.option for i in schema.inputs]
        expected = [
            defs.OpSchema.FormalParameterOption.Optional
            if a.optional
            else defs.OpSchema.FormalParameterOption.Single
            for a in op.inputs
        ]
        assert options == expected
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
        src_param = schema.inputs[0].type_str
        want_src = {f"tensor({_type_name(t.onnx)})" for t in op.src_types}
        assert allowed[src_param] == want_src
        dst_param = schema.outputs[0].type_str
        assert allowed[dst_param] == {f"tensor({_type_name(t.onnx)})" for t in op.dst_types}


def _type_name(elem: int) -> str:
    return helper.tensor_dtype_to_string(elem).split(".")[-1].lower()


# ------------------------------------------------------------------------------------------
# every type row passes the checker and strict inference, with the right dst type
# ------------------------------------------------------------------------------------------


def _row_cases() -> list[Any]:
    cases = []
    for op in OPS.values():
        for row in op.type_rows:
            zps_options: list[dtypes.DType | None] = [None, *row.zps]
            for zps in zps_options:
                cases.append(
                    pytest.param(op.name, row, zps, id=f"{op.name}-{row.src}-{row.dst}-{zps}")
                )
    return cases


@pytest.mark.parametrize(("op_name", "row", "zps"), _row_cases())
def test_each_type_row_checks_and_infers(op_name: str, row: Any, zps: dtypes.DType | None) -> None:
    op = OPS[op_name]
    shape: Shape = ["N", 3, 4]
    inputs: list[tuple[str, int, Shape]] = [("src", row.src.onnx, shape)]
    attributes: dict[str, Any] = {}
    if op.is_static:
        attributes["scales"] = [0.5]
        if op.is_quantize:
            attributes["output_dtype"] = row.dst.onnx
    else:
        inputs.append(("scales", row.scales.onnx, [1]))
        if zps is not None:
            inputs.append(("zps", zps.onnx, [1]))
        if op.is_quantize and (zps not in (dtypes.S8, dtypes.U8) or row.dst != zps):
            attributes["output_dtype"] = row.dst.onnx  # else only a declaration would say
    found = inferred_dst(op_model(op_name, inputs, attributes))
    assert found.tensor_type.elem_type == row.dst.onnx
    assert dims(found) == shape


@pytest.mark.parametrize(
    ("zps", "output_dtype", "expected"),
    [
        (None, None, TensorProto.UINT8),
        (TensorProto.UINT8, None, TensorProto.UINT8),
        (TensorProto.INT8, None, TensorProto.INT8),
        (TensorProto.INT32, None, TensorProto.UINT8),
        (None, TensorProto.INT8, TensorProto.INT8),
        (None, TensorProto.UINT8, TensorProto.UINT8),
        (TensorProto.INT32, TensorProto.INT8, TensorProto.INT8),
        (TensorProto.INT8, TensorProto.UINT8, TensorProto.UINT8),
        (TensorProto.UINT8, TensorProto.INT8, TensorProto.INT8),
    ],
)
def test_dynamic_quantize_dst_type(
    zps: int | None, output_dtype: int | None, expected: int
) -> None:
    """dst = output_dtype if given, else the zps type when 8-bit, else the declared type (u8
    when nothing is declared): inference, which cannot see a declaration, leaves that one be."""
    inputs: list[tuple[str, int, Shape]] = [("src", TensorProto.FLOAT, [2, 3])]
    inputs.append(("scales", TensorProto.FLOAT, [1]))
    if zps is not None:
        inputs.append(("zps", zps, [1]))
    attributes = {} if output_dtype is None else {"output_dtype": output_dtype}
    model = op_model("DynamicQuantize", inputs, attributes)
    if output_dtype is None and zps not in (TensorProto.INT8, TensorProto.UINT8):
        assert inferred_dst_or_none(model) is None
    else:
        assert inferred_dst(model).tensor_type.elem_type == expected
    # the reference kernel agrees
    zp = None if zps is None else np.zeros(1, helper.tensor_dtype_to_np_dtype(zps))
    out = reference.dynamic_quantize(
        np.ones((2, 3), F32), np.ones(1, F32), zp, output_dtype=output_dtype or 0
    )
    assert out.dtype == helper.tensor_dtype_to_np_dtype(expected)


@pytest.mark.parametrize(
    ("output_dtype", "expected"),
    [
        (None, TensorProto.UINT8),
        (TensorProto.INT8, TensorProto.INT8),
        (TensorProto.UINT8, TensorProto.UINT8),
        (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FN),
        (TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2),
    ],
)
def test_static_quantize_dst_type(output_dtype: int | None, expected: int) -> None:
    attributes: dict[str, Any] = {"scales": [0.1]}
    if output_dtype is not None:
        attributes["output_dtype"] = output_dtype
    model = op_model("Quantize", [("src", TensorProto.FLOAT, [5])], attributes)
    if output_dtype is None:  # the declaration decides: inference leaves it be
        assert inferred_dst_or_none(model) is None
        assert reference.quantize(np.ones(5, F32), scales=[0.1]).dtype == np.uint8
    else:
        assert inferred_dst(model).tensor_type.elem_type == expected


@pytest.mark.parametrize("backend", EVERY_BACKEND)
@pytest.mark.parametrize("declared", [TensorProto.INT8, TensorProto.UINT8], ids=["s8", "u8"])
@pytest.mark.parametrize("case", ["dynamic-no-zps", "dynamic-s32-zps", "static-no-zps"])
def test_a_declared_dst_passes_the_checker_and_runs(backend: str, declared: int, case: str) -> None:
    """The seed's rule: with neither output_dtype nor s8/u8 zps, the declared dst type decides.
    onnx.checker (full_check, strict inference) accepts the model, and every backend computes
    that type (quantgraph.InferenceSession writes it as output_dtype)."""
    src = np.array([-1.0, 0.0, 1.0, 2.0, -300.0, 300.0], F32)
    scales = np.array([0.1], F32)
    zps = np.array([-5], np.int32) if case == "dynamic-s32-zps" else None
    if case == "static-no-zps":
        model = spec_op_model("Quantize", graph_input(src), [0.1], dst_type=declared)
        feeds: dict[str, np.ndarray] = {"src": src}
    else:
        operands: list[Any] = [graph_input(src), graph_input(scales)]
        feeds = {"src": src, "scales": scales}
        if zps is not None:
            operands.append(graph_input(zps))
            feeds["zps"] = zps
        model = spec_op_model("DynamicQuantize", *operands, dst_type=declared)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    got = run_quantgraph(model, backend, feeds)[0]
    want = reference.dynamic_quantize(src, scales, zps, output_dtype=declared)
    np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize(
    "src", [TensorProto.INT8, TensorProto.UINT8, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2]
)
def test_dequantize_dst_is_float(src: int) -> None:
    model = op_model("Dequantize", [("src", src, [2, "C"])], {"scales": [1.0]})
    found = inferred_dst(model)
    assert found.tensor_type.elem_type == TensorProto.FLOAT
    assert dims(found) == [2, "C"]
    if src in (TensorProto.INT8, TensorProto.UINT8):
        model = op_model(
            "DynamicDequantize",
            [("src", src, [2, "C"]), ("scales", TensorProto.FLOAT, [1])],
        )
        assert inferred_dst(model).tensor_type.elem_type == TensorProto.FLOAT


@pytest.mark.parametrize(
    ("shape", "axis", "count"),
    [
        ([2, 3, 4], 1, 3),
        ([2, 3, 4], -1, 4),
        ([2, 3, 4], -3, 2),
        ([7], 0, 7),
        ([7], -1, 7),
        ([1, 2, 3, 4, 5], 4, 5),
        (["B", 3, "W"], 1, 3),
        (["B", "C", 4], 1, 9),
    ],
)
def test_per_channel_shapes_infer(shape: Shape, axis: int, count: int) -> None:
    """Counts that match (or cannot be checked: symbolic dims) pass; shapes are propagated."""
    for op, inputs, attributes in (
        (
            "DynamicQuantize",
            [
                ("src", TensorProto.FLOAT, shape),
                ("scales", TensorProto.FLOAT, [count]),
                ("zps", TensorProto.INT8, [count]),
            ],
            {"qtype": "per_channel", "axis": axis},
        ),
        (
            "DynamicDequantize",
            [("src", TensorProto.UINT8, shape), ("scales", TensorProto.FLOAT, ["K"])],
            {"qtype": "per_channel", "axis": axis},
        ),
        (
            "Quantize",
            [("src", TensorProto.FLOAT, shape)],
            {
                "qtype": "per_channel",
                "axis": axis,
                "scales": [0.5] * count,
                "zps": [1] * count,
                "output_dtype": TensorProto.UINT8,  # else the declaration decides
            },
        ),
        (
            "Dequantize",
            [("src", TensorProto.INT8, shape)],
            {"qtype": "per_channel", "axis": axis, "scales": [0.5] * count},
        ),
    ):
        found = inferred_dst(op_model(op, inputs, attributes))
        assert dims(found) == shape, op


def test_inference_without_shapes_still_sets_the_type() -> None:
    model = op_model(
        "DynamicQuantize",
        [("src", TensorProto.FLOAT, None), ("scales", TensorProto.FLOAT, None)],
        {"output_dtype": TensorProto.INT8},
    )
    model.graph.output[0].type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    found = next(v.type for v in inferred.graph.value_info if v.name == "dst")
    assert found.tensor_type.elem_type == TensorProto.INT8


# ------------------------------------------------------------------------------------------
# inference rejects what the spec rejects, with the rule's message
# ------------------------------------------------------------------------------------------

VIOLATIONS: dict[str, tuple[str, list[tuple[str, int, Shape]], dict[str, Any], str]] = {
    "per-channel-scale-count": (
        "DynamicQuantize",
        [("src", TensorProto.FLOAT, [1, 2, 3]), ("scales", TensorProto.FLOAT, [3])],
        {"qtype": "per_channel"},
        "DynamicQuantize node 'node0': per_channel needs one scale per element of src along "
        "axis 1 (2); got 3 [rule per-channel-scale-count]",
    ),
    "per-channel-scale-count-static": (
        "Dequantize",
        [("src", TensorProto.INT8, [1, 2, 3])],
        {"qtype": "per_channel", "axis": -3, "scales": [0.5, 0.1, 0.2]},
        "Dequantize node 'node0': per_channel needs one scale per element of src along "
        "axis -3 (1); got 3 [rule per-channel-scale-count]",
    ),
    "qtype": (
        "DynamicDequantize",
        [("src", TensorProto.UINT8, [4]), ("scales", TensorProto.FLOAT, [1])],
        {"qtype": "per_block"},
        "DynamicDequantize node 'node0': qtype must be one of per_tensor, per_channel, "
        "per_group; got 'per_block' [rule qtype]",
    ),
    "group-divides": (
        "DynamicDequantize",
        [("src", TensorProto.UINT4, [64, 8]), ("scales", TensorProto.FLOAT16, [3, 8])],
        {"qtype": "per_group", "group_shape": [32, 1]},
        "DynamicDequantize node 'node0': src dim 0 (64) must equal scales dim 0 (3) times "
        "group_shape[0] (32) [rule group-divides]",
    ),
    "qtype-static": (
        "Quantize",
        [("src", TensorProto.FLOAT, [4])],
        {"qtype": "tensor", "scales": [1.0]},
        "Quantize node 'node0': qtype must be one of per_tensor, per_channel; got 'tensor' "
        "[rule qtype]",
    ),
    "axis-range": (
        "Quantize",
        [("src", TensorProto.FLOAT, [4, 2])],
        {"qtype": "per_channel", "axis": 2, "scales": [1.0, 1.0]},
        "Quantize node 'node0': axis 2 is out of range [-2, 1] for src of rank 2 [rule axis-range]",
    ),
    "scales-rank": (
        "DynamicQuantize",
        [("src", TensorProto.FLOAT, [4]), ("scales", TensorProto.FLOAT, [])],
        {},
        "DynamicQuantize node 'node0': scales must be a 1-D tensor; got rank 0 [rule scales-rank]",
    ),
    "zps-rank": (
        "DynamicDequantize",
        [
            ("src", TensorProto.INT8, [4]),
            ("scales", TensorProto.FLOAT, [1]),
            ("zps", TensorProto.INT8, [1, 1]),
        ],
        {},
        "DynamicDequantize node 'node0': zps must be a 1-D tensor; got rank 2 [rule zps-rank]",
    ),
    "per-tensor-scale-count": (
        "Quantize",
        [("src", TensorProto.FLOAT, [4])],
        {"scales": [1.0, 2.0]},
        "Quantize node 'node0': per_tensor needs exactly one scale; got 2 "
        "[rule per-tensor-scale-count]",
    ),
    "zps-count": (
        "DynamicDequantize",
        [
            ("src", TensorProto.UINT8, [1, 2, 3]),
            ("scales", TensorProto.FLOAT, [1]),
            ("zps", TensorProto.UINT8, [2]),
        ],
        {},
        "DynamicDequantize node 'node0': zps must have as many elements as scales (1); got 2 "
        "[rule zps-count]",
    ),
    "f8-zps": (
        "Quantize",
        [("src", TensorProto.FLOAT, [4])],
        {"scales": [0.5], "zps": [0], "output_dtype": TensorProto.FLOAT8E5M2},
        "Quantize node 'node0': zps are not allowed with f8_e5m2 [rule f8-zps]",
    ),
    "f8-zps-dequantize": (
        "Dequantize",
        [("src", TensorProto.FLOAT8E4M3FN, [4])],
        {"scales": [0.5], "zps": [0]},
        "Dequantize node 'node0': zps are not allowed with f8_e4m3 [rule f8-zps]",
    ),
    "scale-value-static": (
        "Quantize",
        [("src", TensorProto.FLOAT, [4])],
        {"scales": [0.0]},
        "Quantize node 'node0': scales[0] = 0.0: quantize divides by the scale, so it must be "
        "finite and non-zero [rule scale-value]",
    ),
    "zps-value": (
        "Dequantize",
        [("src", TensorProto.INT8, [4])],
        {"scales": [0.5], "zps": [2**31]},
        "Dequantize node 'node0': zps[0] = 2147483648 does not fit in s32 [rule zps-value]",
    ),
    "src-type": (
        "DynamicDequantize",
        [("src", TensorProto.INT32, [4]), ("scales", TensorProto.FLOAT, [1])],
        {},
        "DynamicDequantize node 'node0': src type s32 is not supported (allowed: s8, u8, s4, u4) "
        "[rule src-type]",
    ),
    "dst-type": (
        "DynamicQuantize",
        [("src", TensorProto.FLOAT, [4]), ("scales", TensorProto.FLOAT, [1])],
        {"output_dtype": TensorProto.FLOAT},
        "DynamicQuantize node 'node0': dst type f32 is not supported (allowed: s8, u8) "
        "[rule dst-type]",
    ),
}


@pytest.mark.parametrize("case_id", list(VIOLATIONS))
def test_inference_rejects_spec_violations(case_id: str) -> None:
    op, inputs, attributes, message = VIOLATIONS[case_id]
    error = inference_error(op_model(op, inputs, attributes))
    assert message in error, error


def test_inference_rejects_constant_zero_scale_of_dynamic_quantize() -> None:
    scales = onnx.numpy_helper.from_array(np.array([0.5, np.inf], F32), "scales")
    model = op_model(
        "DynamicQuantize",
        [("src", TensorProto.FLOAT, [2, 2]), ("scales", TensorProto.FLOAT, [2])],
        {"qtype": "per_channel"},
        initializers=[scales],
    )
    error = inference_error(model)
    assert (
        "DynamicQuantize node 'node0': scales[1] = inf: quantize divides by the scale, so it "
        "must be finite and non-zero [rule scale-value]"
    ) in error
    # dequantize accepts any scale value
    dq = op_model(
        "DynamicDequantize",
        [("src", TensorProto.INT8, [2, 2]), ("scales", TensorProto.FLOAT, [2])],
        {"qtype": "per_channel"},
        initializers=[onnx.numpy_helper.from_array(np.array([0.0, np.nan], F32), "scales")],
    )
    assert inferred_dst(dq).tensor_type.elem_type == TensorProto.FLOAT
    static = op_model("Dequantize", [("src", TensorProto.UINT8, [3])], {"scales": [float("inf")]})
    assert inferred_dst(static).tensor_type.elem_type == TensorProto.FLOAT


def test_checker_rejects_missing_required_parts() -> None:
    no_scales = op_model("Quantize", [("src", TensorProto.FLOAT, [4])], {})
    with pytest.raises(onnx.checker.ValidationError, match="scales"):
        onnx.checker.check_model(no_scales, full_check=True)
    empty_scales = op_model(
        "DynamicQuantize", [("src", TensorProto.FLOAT, [4]), ("", TensorProto.FLOAT, [1])]
    )
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(empty_scales, full_check=True)
    unknown_attribute = op_model(
        "Dequantize", [("src", TensorProto.INT8, [4])], {"scales": [1.0], "output_dtype": 1}
    )
    with pytest.raises(onnx.checker.ValidationError, match="output_dtype"):
        onnx.checker.check_model(unknown_attribute, full_check=True)


def test_inference_message_names_the_node() -> None:
    op, inputs, attributes, _ = VIOLATIONS["qtype-static"]
    error = inference_error(op_model(op, inputs, attributes, node_name="my (odd) node"))
    assert "Quantize node 'my (odd) node': qtype must be one of" in error, error


# ------------------------------------------------------------------------------------------
# onnx.reference.ReferenceEvaluator runs the ops
# ------------------------------------------------------------------------------------------


def _evaluator_cases() -> list[Any]:
    x = np.array([-1.0, 0.0, 1.0, 2.0], F32).reshape(1, 2, 2)
    q = np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2)
    s1 = np.array([0.1], F32)
    return [
        pytest.param(
            "DynamicQuantize",
            {"src": x, "scales": s1, "zps": np.array([10], np.uint8)},
            {},
            np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2),
            id="onednn-dynamic-quantize",
        ),
        pytest.param(
            "DynamicDequantize",
            {"src": q, "scales": s1},
            {},
            reference.dynamic_dequantize(q, s1),
            id="onednn-dynamic-dequantize",
        ),
        pytest.param(
            "Quantize",
            {"src": x},
            {"qtype": "per_channel", "axis": 1, "scales": [0.1, 0.2], "output_dtype": 3},
            np.array([-10, 0, 5, 10], np.int8).reshape(1, 2, 2),
            id="onednn-quantize",
        ),
        pytest.param(
            "Dequantize",
            {"src": q},
            {"scales": [0.1], "zps": [10]},
            reference.dequantize(q, scales=[0.1], zps=[10]),
            id="onednn-dequantize",
        ),
        pytest.param(
            "Quantize",
            {"src": x * F32(100)},
            {"scales": [0.5], "output_dtype": TensorProto.FLOAT8E4M3FN},
            reference.quantize(x * F32(100), scales=[0.5], output_dtype=TensorProto.FLOAT8E4M3FN),
            id="quantize-f8",
        ),
        pytest.param(
            "Dequantize",
            {"src": x.astype(ml_dtypes.float8_e5m2)},
            {"scales": [2.0, 4.0], "qtype": "per_channel", "axis": -1},
            reference.dequantize(
                x.astype(ml_dtypes.float8_e5m2), scales=[2.0, 4.0], qtype="per_channel", axis=-1
            ),
            id="dequantize-f8-per-channel",
        ),
        pytest.param(
            "DynamicQuantize",
            {"src": x, "scales": np.array([0.25, 0.5], F32), "zps": np.array([-3, 1000], np.int32)},
            {"qtype": "per_channel", "axis": -2, "output_dtype": 3},
            np.array([-7, -3, 127, 127], np.int8).reshape(1, 2, 2),
            id="dynamic-quantize-s32-zps",
        ),
    ]


@pytest.mark.parametrize(("op", "feeds", "attributes", "expected"), _evaluator_cases())
def test_reference_evaluator_runs_the_ops(
    op: str, feeds: dict[str, np.ndarray], attributes: dict[str, Any], expected: np.ndarray
) -> None:
    evaluator = pytest.importorskip("quantgraph.reference.evaluator")
    new_ops = evaluator.REFERENCE_OPS
    from onnx.reference.op_run import OpRun

    assert len(new_ops) == len(OPS)
    assert all(issubclass(cls, OpRun) and cls.op_domain == DOMAIN for cls in new_ops)
    assert sorted(cls.__name__ for cls in new_ops) == sorted(OPS)
    inputs = [
        (name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)) for name, a in feeds.items()
    ]
    model = op_model(op, inputs, attributes)
    onnx.checker.check_model(model, full_check=True)
    got = run_evaluator(ReferenceEvaluator(model, new_ops=new_ops), ["dst"], feeds)[0]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(
        np.asarray(got).view(np.uint8) if got.dtype.itemsize == 1 else got,
        expected.view(np.uint8) if expected.dtype.itemsize == 1 else expected,
    )


def test_reference_evaluator_reports_spec_errors() -> None:
    evaluator = pytest.importorskip("quantgraph.reference.evaluator")
    model = op_model(
        "DynamicQuantize",
        [("src", TensorProto.FLOAT, [1, 2, 2]), ("scales", TensorProto.FLOAT, ["K"])],
        {"qtype": "per_channel"},
    )
    run = ReferenceEvaluator(model, new_ops=evaluator.REFERENCE_OPS)
    feeds = {"src": np.zeros((1, 2, 2), F32), "scales": np.ones(3, F32)}
    with pytest.raises(
        ValueError, match=r"DynamicQuantize node 'node0': per_channel .*\(2\); got 3"
    ):
        run.run(None, feeds)
