"""quantgraph.spec's check functions on their own, the behaviour the rules expect that quantgraph
does not have yet, and the data-type tables and attribute defaults against the oneDNN Graph
pages (/work/shared/seeds) and the notes (quantization-facts.md), transcribed here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

from quantgraph import reference
from quantgraph.spec import (
    DEQUANTIZE,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    OPS,
    QUANTIZE,
    SpecError,
    check_call,
    check_scale_values,
    check_shapes,
    dst_type,
    dtypes,
    resolve_axis,
)
from tests.spec_values import INF, NAN, S1, S3, X23, XU8, X, f32, s32, same, u8

R = reference

# ------------------------------------------------------------------------------------------
# The check functions on their own.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("axis", "rank", "expected"),
    [
        (0, 1, 0),
        (-1, 1, 0),
        (1, 1, None),
        (-2, 1, None),
        (-3, 3, 0),
        (2, 3, 2),
        (3, 3, None),
        (-4, 3, None),
        (0, 0, None),
        (-1, 5, 4),
        (4, 5, 4),
        (-5, 5, 0),
        (-6, 5, None),
    ],
)
def test_resolve_axis(axis: int, rank: int, expected: int | None) -> None:
    assert resolve_axis(axis, rank) == expected


def test_check_shapes_unknown_dims_pass_and_axis_is_resolved() -> None:
    kwargs: dict[str, Any] = {"qtype": "per_channel", "zps_shape": [None]}
    assert (
        check_shapes(QUANTIZE, "n", axis=-1, src_shape=[2, None], scales_shape=[7], **kwargs) == 1
    )
    assert check_shapes(QUANTIZE, "n", axis=1, src_shape=[2, 3], scales_shape=[None], **kwargs) == 1
    per_tensor = check_shapes(
        QUANTIZE, "n", qtype="per_tensor", axis=5, src_shape=[], scales_shape=[None], zps_shape=None
    )
    assert per_tensor is None
    with pytest.raises(SpecError) as caught:
        check_shapes(
            QUANTIZE,
            "n",
            qtype="per_channel",
            axis=0,
            src_shape=[4],
            scales_shape=[4],
            zps_shape=[5],
        )
    assert str(caught.value) == (
        "Quantize node 'n': zps must have as many elements as scales (4); got 5 [rule zps-count]"
    )


def test_check_scale_values_only_for_quantize_ops() -> None:
    bad = f32([0.0, INF, NAN, -INF])
    check_scale_values(DEQUANTIZE, "d", bad)
    check_scale_values(DYNAMIC_DEQUANTIZE, "d", bad)
    for op in (QUANTIZE, DYNAMIC_QUANTIZE):
        with pytest.raises(SpecError, match=r"scales\[0\] = 0\.0"):
            check_scale_values(op, "q", bad)
    check_scale_values(QUANTIZE, "q", f32([1e-45, -3.0e38, 1.0]))  # finite non-zero is fine


def test_check_call_returns_resolved_axis() -> None:
    checked = check_call(
        DYNAMIC_QUANTIZE,
        "q",
        src=X23,
        scales=S3,
        zps=s32([0, 1, 2]),
        attributes={"qtype": "per_channel", "axis": -1},
    )
    assert (checked.axis, checked.dst, checked.qtype) == (2, TensorProto.UINT8, "per_channel")


@pytest.mark.parametrize(
    ("op", "output_dtype", "zps", "declared", "expected"),
    [
        ("DynamicDequantize", 0, TensorProto.INT8, TensorProto.INT8, TensorProto.FLOAT),
        ("Dequantize", 0, None, None, TensorProto.FLOAT),
        ("DynamicQuantize", TensorProto.INT8, TensorProto.UINT8, None, TensorProto.INT8),
        ("DynamicQuantize", 0, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT8),
        ("DynamicQuantize", 0, TensorProto.INT32, TensorProto.INT8, TensorProto.INT8),
        ("DynamicQuantize", 0, TensorProto.INT32, None, TensorProto.UINT8),
        ("Quantize", 0, None, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FN),
        ("Quantize", 0, None, None, TensorProto.UINT8),
        ("Quantize", TensorProto.INT16, None, None, TensorProto.INT16),
    ],
)
def test_dst_type_rule(
    op: str, output_dtype: int, zps: int | None, declared: int | None, expected: int
) -> None:
    """output_dtype, then a dynamic op's s8/u8 zps, then the declared type, then u8."""
    assert dst_type(OPS[op], output_dtype=output_dtype, zps=zps, declared=declared) == expected


def test_op_forms_and_defaults() -> None:
    assert QUANTIZE.dynamic_form is DYNAMIC_QUANTIZE and DYNAMIC_QUANTIZE.static_form is QUANTIZE
    assert DEQUANTIZE.dynamic_form is DYNAMIC_DEQUANTIZE
    assert DYNAMIC_DEQUANTIZE.dynamic_form is DYNAMIC_DEQUANTIZE
    assert QUANTIZE.defaults == {"qtype": "per_tensor", "axis": 1, "output_dtype": 0}
    assert DEQUANTIZE.with_defaults({"axis": 0, "scales": [1.0]}) == {
        "qtype": "per_tensor",
        "axis": 0,
        "scales": [1.0],
    }


def test_check_order_type_before_shape_before_value() -> None:
    """A call that breaks several rules reports the type rule first, then shapes, then values."""
    with pytest.raises(SpecError) as caught:
        R.dynamic_quantize(X.astype(np.int8), f32([0.0, 0.0, 0.0]), node="q")
    assert caught.value.rule == "src-type"
    with pytest.raises(SpecError) as caught:
        R.dynamic_quantize(X, f32([0.0, 0.0, 0.0]), node="q")
    assert caught.value.rule == "per-tensor-scale-count"


# ------------------------------------------------------------------------------------------
# Behaviour expected from the rules that quantgraph does not have yet (reported).
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: R.dynamic_quantize(X, None, node="q"),  # type: ignore[arg-type]  # on purpose
            "DynamicQuantize node 'q': input 'scales' is required [rule missing-input]",
        ),
        (
            lambda: R.dynamic_dequantize(XU8, None, node="dd"),  # type: ignore[arg-type]  # on purpose
            "DynamicDequantize node 'dd': input 'scales' is required [rule missing-input]",
        ),
    ],
    ids=["dynamic_quantize", "dynamic_dequantize"],
)
def test_reference_missing_scales_is_the_missing_input_rule(
    call: Callable[[], Any], message: str
) -> None:
    """check_types has the missing-input rule, but check_call reads scales.dtype first."""
    with pytest.raises(SpecError) as caught:
        call()
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: R.dynamic_quantize(X.astype(np.float64), S1, node="q"),
            "DynamicQuantize node 'q': src type double is not supported (allowed: f32) "
            "[rule src-type]",
        ),
        (
            lambda: R.dynamic_quantize(X, S1.astype(np.float16), node="q"),
            "DynamicQuantize node 'q': scales type f16 is not supported (allowed: f32) "
            "[rule scales-type]",
        ),
        (
            lambda: R.dynamic_dequantize(XU8, S1, np.zeros(1, np.int16), node="dd"),
            "DynamicDequantize node 'dd': zps type int16 is not supported "
            "(allowed: s8, u8, s32) [rule zps-type]",
        ),
    ],
    ids=["src-double", "scales-float16", "zps-int16"],
)
def test_types_outside_the_spec_are_named(call: Callable[[], Any], message: str) -> None:
    """The reference names a numpy type outside the spec as onnx_name does for the schemas.

    Today check_call maps such types to -1 and says "src type type -1 is not supported".
    """
    with pytest.raises(SpecError) as caught:
        call()
    assert str(caught.value) == message


# ------------------------------------------------------------------------------------------
# Data-type tables and attributes against the seeds and notes.
# ------------------------------------------------------------------------------------------

# (src, dst, scales, zps) rows as the oneDNN Graph pages list them; None: no scales input.
SEED_TABLES: dict[str, set[tuple[str, str, str | None, frozenset[str]]]] = {
    "DynamicQuantize": {
        ("f32", "s8", "f32", frozenset({"s8", "u8", "s32"})),
        ("f32", "u8", "f32", frozenset({"s8", "u8", "s32"})),
    },
    "DynamicDequantize": {
        ("s8", "f32", "f32", frozenset({"s8", "u8", "s32"})),
        ("u8", "f32", "f32", frozenset({"s8", "u8", "s32"})),
    },
    "Quantize": {("f32", d, None, frozenset()) for d in ("s8", "u8", "f8_e4m3", "f8_e5m2")},
    "Dequantize": {(s, "f32", None, frozenset()) for s in ("s8", "u8", "f8_e4m3", "f8_e5m2")},
}


def test_type_tables_match_the_seeds() -> None:
    assert set(OPS) == set(SEED_TABLES)
    for name, op in OPS.items():
        rows = {
            (
                r.src.name,
                r.dst.name,
                r.scales.name if r.scales else None,
                frozenset(z.name for z in r.zps),
            )
            for r in op.type_rows
        }
        assert rows == SEED_TABLES[name] | V3_13_ROWS.get(name, set()), name
        assert len(op.type_rows) == len(rows), f"{name} has duplicate rows"


# oneDNN v3.13's DynamicDequantize rows beyond the seeds (doc/graph/operations/
# DynamicDequantize.md): 4-bit src, f16/bf16 scales and dst; plus u8 zps with u4 src, which its
# op schema and gated_mlp_int4 example take.
V3_13_ROWS = {
    "DynamicDequantize": {
        (src, dst, dst, frozenset(zps))
        for src, zps in (
            ("s8", {"s8", "u8", "s32"}),
            ("u8", {"s8", "u8", "s32"}),
            ("s4", {"s4", "s32"}),
            ("u4", {"u4", "u8", "s32"}),
        )
        for dst in ("f32", "f16", "bf16")
    }
}


def test_op_kinds_and_arguments() -> None:
    assert [(o.name, o.is_quantize, o.is_static) for o in OPS.values()] == [
        ("DynamicQuantize", True, False),
        ("DynamicDequantize", False, False),
        ("Quantize", True, True),
        ("Dequantize", False, True),
    ]
    for op in (DYNAMIC_QUANTIZE, DYNAMIC_DEQUANTIZE):
        assert [(a.name, a.optional) for a in op.inputs] == [
            ("src", False),
            ("scales", False),
            ("zps", True),
        ]
    for op in (QUANTIZE, DEQUANTIZE):
        assert [(a.name, a.optional) for a in op.inputs] == [("src", False)]
    for op in OPS.values():
        assert [(a.name, a.optional) for a in op.outputs] == [("dst", False)]


def test_attribute_defaults() -> None:
    for op in OPS.values():
        qtype = op.attribute("qtype")
        assert (qtype.kind, qtype.required, qtype.default) == ("string", False, "per_tensor")
        groups = {"per_group"} if op is DYNAMIC_DEQUANTIZE else set()
        assert set(qtype.allowed) == {"per_tensor", "per_channel", *groups}
        assert op.has_attribute("group_shape") == bool(groups)
        axis = op.attribute("axis")
        assert (axis.kind, axis.required, axis.default) == ("int", False, 1)
    for op in (QUANTIZE, DEQUANTIZE):
        scales = op.attribute("scales")
        assert (scales.kind, scales.required) == ("floats", True)
        zps = op.attribute("zps")
        assert (zps.kind, zps.required, zps.default) == ("ints", False, None)
    for op in (DYNAMIC_QUANTIZE, DYNAMIC_DEQUANTIZE):
        with pytest.raises(KeyError):
            op.attribute("scales")
    for op in (DYNAMIC_QUANTIZE, QUANTIZE):  # the quantgraph extension, as ONNX QuantizeLinear-21
        out = op.attribute("output_dtype")
        assert (out.kind, out.required, out.default) == ("int", False, 0)
    for op in (DYNAMIC_DEQUANTIZE, DEQUANTIZE):
        with pytest.raises(KeyError):
            op.attribute("output_dtype")


def test_reference_defaults_follow_the_spec() -> None:
    """Omitted qtype/axis behave as per_tensor/axis 1; omitted zps as zeros; dst as u8."""
    explicit = R.dynamic_quantize(X, S1, u8([0]), qtype="per_tensor", axis=1)
    same(R.dynamic_quantize(X, S1), explicit)
    per_channel = R.dequantize(XU8, scales=[1.0, 2.0], qtype="per_channel")
    same(per_channel, R.dequantize(XU8, scales=[1.0, 2.0], qtype="per_channel", axis=1))
    assert R.quantize(X, scales=[1.0]).dtype == np.uint8


@pytest.mark.parametrize(
    ("zps", "expected"),
    [(None, "u8"), ("u8", "u8"), ("s8", "s8"), ("s32", "u8")],
)
def test_dst_type_of_dynamic_quantize(zps: str | None, expected: str) -> None:
    found = dst_type(DYNAMIC_QUANTIZE, zps=dtypes.BY_NAME[zps].onnx if zps else None)
    assert found == dtypes.BY_NAME[expected].onnx
    zp = None if zps is None else np.zeros(1, dtypes.BY_NAME[zps].numpy)
    assert R.dynamic_quantize(X, S1, zp).dtype == dtypes.BY_NAME[expected].numpy


def test_dtype_table() -> None:
    expected = {
        "s8": (TensorProto.INT8, np.dtype(np.int8)),
        "u8": (TensorProto.UINT8, np.dtype(np.uint8)),
        "s32": (TensorProto.INT32, np.dtype(np.int32)),
        "f32": (TensorProto.FLOAT, np.dtype(np.float32)),
        "f8_e4m3": (TensorProto.FLOAT8E4M3FN, np.dtype(ml_dtypes.float8_e4m3fn)),
        "f8_e5m2": (TensorProto.FLOAT8E5M2, np.dtype(ml_dtypes.float8_e5m2)),
        "s4": (TensorProto.INT4, np.dtype(ml_dtypes.int4)),
        "u4": (TensorProto.UINT4, np.dtype(ml_dtypes.uint4)),
        "f16": (TensorProto.FLOAT16, np.dtype(np.float16)),
        "bf16": (TensorProto.BFLOAT16, np.dtype(ml_dtypes.bfloat16)),
    }
    assert {d.name: (d.onnx, d.numpy) for d in dtypes.ALL} == expected
    for d in dtypes.ALL:
        assert dtypes.from_onnx(d.onnx) is d
        assert dtypes.from_numpy(d.numpy) is d
        if d.is_float8:
            finfo = ml_dtypes.finfo(d.numpy)  # type: ignore[no-untyped-call]  # ml_dtypes: no hints
            assert d.float8_max == float(finfo.max)
        elif d.numpy.kind in "iu":
            info = np.iinfo(d.numpy)
            assert d.int_range == (info.min, info.max)
    assert dtypes.F8_E4M3.float8_max == 448.0
    assert dtypes.F8_E5M2.float8_max == 57344.0
    assert dtypes.from_onnx(TensorProto.DOUBLE) is None
    assert dtypes.onnx_name(TensorProto.DOUBLE) == "double"
    assert dtypes.onnx_name(TensorProto.INT8) == "s8"
