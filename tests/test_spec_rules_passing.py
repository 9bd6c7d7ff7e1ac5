"""Every validation rule of quantgraph.spec.RULES, satisfied: a passing case per rule and every
type row of the spec accepted (the failing cases: test_spec_rules.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

from quantgraph import reference
from quantgraph.spec import (
    DYNAMIC_QUANTIZE,
    OPS,
    RULES,
    check_node,
    check_types,
    dtypes,
)
from tests.spec_values import (
    F32,
    INF,
    NAN,
    S1,
    S2,
    X23,
    XU8,
    X,
    declared_facts,
    f32,
    s8,
    s32,
    same,
    u8,
)

R = reference

# ------------------------------------------------------------------------------------------
# Passing cases, one group per rule: the call is accepted and computes the right values.
# Expected values are worked by hand from dst = saturate(rint(src / s) + zp) and
# dst = (src - zp) * s.
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pass:
    rule: str
    call: Callable[[], np.ndarray]
    expected: np.ndarray


PASSES: dict[str, Pass] = {
    "group-shape-rank/per-group-2x2": Pass(
        "group-shape-rank",
        lambda: R.dynamic_dequantize(
            XU8,
            f32([1.0, 2.0]).reshape(1, 2, 1),
            u8([0, 10]).reshape(1, 2, 1),
            qtype="per_group",
            group_shape=[1, 1, 2],
        ),
        f32([0, 10, 20, 40]).reshape(1, 2, 2),
    ),
    "group-shape-value/one-group": Pass(
        "group-shape-value",
        lambda: R.dynamic_dequantize(
            XU8, f32([0.5]).reshape(1, 1, 1), qtype="per_group", group_shape=[1, 2, 2]
        ),
        f32([0, 5, 10, 15]).reshape(1, 2, 2),
    ),
    "group-scales-rank/f16-dst": Pass(
        "group-scales-rank",
        lambda: R.dynamic_dequantize(
            XU8,
            f32([0.5, 2.0]).astype(np.float16).reshape(1, 2, 1),
            qtype="per_group",
            group_shape=[1, 1, 2],
        ),
        np.array([0, 5, 40, 60], np.float16).reshape(1, 2, 2),
    ),
    "group-divides/along-the-last-axis": Pass(
        "group-divides",
        lambda: R.dynamic_dequantize(
            XU8, f32([1.0, 2.0]).reshape(1, 2, 1), qtype="per_group", group_shape=[1, 1, 2]
        ),
        f32([0, 10, 40, 60]).reshape(1, 2, 2),
    ),
    "group-zps-shape/s4": Pass(
        "group-zps-shape",
        lambda: R.dynamic_dequantize(
            np.array([1, -8, 7, 0], ml_dtypes.int4).reshape(2, 2),
            f32([1.0, 1.0]).reshape(2, 1),
            np.array([1, -1], ml_dtypes.int4).reshape(2, 1),
            qtype="per_group",
            group_shape=[1, 2],
        ),
        f32([0, -9, 8, 1]).reshape(2, 2),
    ),
    "attribute-kind/numpy-int-axis": Pass(
        "attribute-kind",
        lambda: R.dynamic_quantize(X, S1, s8([1]), axis=np.int64(1)),
        s8([-1, 1, 3, 5]).reshape(1, 2, 2),
    ),
    "output-type/declared-as-decided": Pass(
        "output-type",
        lambda: np.array(check_node(DYNAMIC_QUANTIZE, "q", declared_facts(TensorProto.UINT8)).dst),
        np.array(TensorProto.UINT8),
    ),
    "qtype/per_tensor": Pass(
        "qtype",
        lambda: R.dynamic_quantize(X, S1, s8([1]), qtype="per_tensor"),
        s8([-1, 1, 3, 5]).reshape(1, 2, 2),
    ),
    "qtype/per_channel": Pass(
        "qtype",
        lambda: R.dynamic_quantize(X, S2, s8([1, -1]), qtype="per_channel"),
        s8([-1, 1, 3, 7]).reshape(1, 2, 2),
    ),
    "axis-range/lowest-negative": Pass(
        "axis-range",
        lambda: R.dequantize(XU8, scales=[2.0], qtype="per_channel", axis=-3),
        f32([0, 20, 40, 60]).reshape(1, 2, 2),
    ),
    "axis-range/last": Pass(
        "axis-range",
        lambda: R.dynamic_dequantize(XU8, f32([1.0, 0.5]), qtype="per_channel", axis=2),
        f32([0, 5, 20, 15]).reshape(1, 2, 2),
    ),
    "axis-range/minus-one": Pass(
        "axis-range",
        lambda: R.dynamic_dequantize(XU8, f32([1.0, 0.5]), qtype="per_channel", axis=-1),
        f32([0, 5, 20, 15]).reshape(1, 2, 2),
    ),
    "axis-range/ignored-for-per-tensor": Pass(
        "axis-range",
        lambda: R.quantize(X, scales=[0.5], axis=99, output_dtype=TensorProto.INT8),
        s8([-2, 0, 2, 4]).reshape(1, 2, 2),
    ),
    "scales-rank/1d": Pass(
        "scales-rank",
        lambda: R.dynamic_quantize(X, S1),
        u8([0, 0, 2, 4]).reshape(1, 2, 2),
    ),
    "zps-rank/1d": Pass(
        "zps-rank",
        lambda: R.dynamic_dequantize(XU8, S1, u8([10])),
        f32([-5, 0, 5, 10]).reshape(1, 2, 2),
    ),
    "per-tensor-scale-count/one": Pass(
        "per-tensor-scale-count",
        lambda: R.quantize(X, scales=[0.25], zps=[100]),
        u8([96, 100, 104, 108]).reshape(1, 2, 2),
    ),
    "per-channel-scale-count/axis-1": Pass(
        "per-channel-scale-count",
        lambda: R.quantize(X, scales=[1.0, 0.5], qtype="per_channel", axis=1),
        u8([0, 0, 2, 4]).reshape(1, 2, 2),
    ),
    "per-channel-scale-count/negative-axis": Pass(
        "per-channel-scale-count",
        lambda: R.dequantize(
            X23.astype(np.int8), scales=[1.0, 2.0, 4.0], qtype="per_channel", axis=-1
        ),
        f32([-3, -4, -4, 0, 2, 8]).reshape(1, 2, 3),
    ),
    "zps-count/equal": Pass(
        "zps-count",
        lambda: R.dynamic_dequantize(XU8, f32([1.0, 2.0]), s32([10, 20]), qtype="per_channel"),
        f32([-10, 0, 0, 20]).reshape(1, 2, 2),
    ),
    "f8-zps/no-zps": Pass(
        "f8-zps",
        lambda: R.quantize(X, scales=[0.5], output_dtype=TensorProto.FLOAT8E4M3FN).astype(F32),
        f32([-2, 0, 2, 4]).reshape(1, 2, 2),
    ),
    "f8-zps/int-with-zps": Pass(
        "f8-zps",
        lambda: R.dequantize(XU8, scales=[1.0], zps=[10]),
        f32([-10, 0, 10, 20]).reshape(1, 2, 2),
    ),
    "scale-value/dequantize-zero": Pass(
        "scale-value",
        lambda: R.dequantize(XU8, scales=[0.0], zps=[10]),
        f32([-0.0, 0, 0, 0]).reshape(1, 2, 2),
    ),
    "scale-value/dequantize-inf": Pass(
        "scale-value",
        lambda: R.dynamic_dequantize(XU8, f32([INF]), u8([10])),
        f32([-INF, NAN, INF, INF]).reshape(1, 2, 2),
    ),
    "scale-value/dequantize-nan": Pass(
        "scale-value",
        lambda: R.dequantize(XU8, scales=[NAN]),
        f32([NAN] * 4).reshape(1, 2, 2),
    ),
    "scale-value/quantize-negative": Pass(
        "scale-value",
        lambda: R.quantize(X, scales=[-0.5], output_dtype=TensorProto.INT8),
        s8([2, 0, -2, -4]).reshape(1, 2, 2),
    ),
    "scale-value/quantize-denormal": Pass(
        "scale-value",
        lambda: R.dynamic_quantize(X, f32([1e-45]), s8([0])),
        s8([-128, 0, 127, 127]).reshape(1, 2, 2),
    ),
    "zps-value/s32-max": Pass(
        "zps-value",
        lambda: R.dequantize(XU8, scales=[1.0], zps=[2**31 - 1]),
        (np.array([0, 10, 20, 30], np.int64) - (2**31 - 1)).astype(F32).reshape(1, 2, 2),
    ),
    "zps-value/s32-min": Pass(
        "zps-value",
        lambda: R.quantize(X, scales=[1.0], zps=[-(2**31)], output_dtype=TensorProto.INT8),
        s8([-128] * 4).reshape(1, 2, 2),
    ),
    "missing-input/zps-is-optional": Pass(
        "missing-input",
        lambda: R.dynamic_dequantize(XU8, S1),
        f32([0, 5, 10, 15]).reshape(1, 2, 2),
    ),
    "missing-attribute/zps-is-optional": Pass(
        "missing-attribute",
        lambda: R.dequantize(XU8.astype(np.int8), scales=[0.5]),
        f32([0, 5, 10, 15]).reshape(1, 2, 2),
    ),
}


@pytest.mark.parametrize("case_id", list(PASSES))
def test_rule_satisfied(case_id: str) -> None:
    case = PASSES[case_id]
    same(case.call(), case.expected)


def test_every_rule_has_a_passing_case_or_type_row() -> None:
    type_rules = {"src-type", "dst-type", "scales-type", "zps-type"}  # covered by table rows
    assert {case.rule for case in PASSES.values()} | type_rules == set(RULES)


def _row_params() -> list[Any]:
    params = []
    for op in OPS.values():
        for row in op.type_rows:
            zps_options: tuple[dtypes.DType | None, ...] = (None, *row.zps)
            for zps in zps_options:
                label = f"{op.name}-{row.src}-{row.dst}-zps_{zps}"
                params.append(pytest.param(op.name, row, zps, id=label))
    return params


@pytest.mark.parametrize(("op_name", "row", "zps"), _row_params())
def test_every_type_row_is_accepted(op_name: str, row: Any, zps: dtypes.DType | None) -> None:
    """src-type/dst-type/scales-type/zps-type pass for every row of the tables."""
    op = OPS[op_name]
    types = {
        "src": row.src.onnx,
        "dst": row.dst.onnx,
        "scales": row.scales.onnx if row.scales else None,
        "zps": zps.onnx if zps else None,
    }
    check_types(op, "n", types)
    src = np.ones((2, 3), F32).astype(row.src.numpy)
    if op.is_static:
        zp_list = None if zps is None else [0]
        if op.is_quantize:
            out = R.quantize(src, scales=[1.0], zps=zp_list, output_dtype=row.dst.onnx)
        else:
            out = R.dequantize(src, scales=[1.0], zps=zp_list)
    else:
        zp = None if zps is None else np.zeros(1, zps.numpy)
        scales = np.ones(1, row.scales.numpy if row.scales else F32)
        if op.is_quantize:
            out = R.dynamic_quantize(src, scales, zp, output_dtype=row.dst.onnx)
        else:
            out = R.dynamic_dequantize(src, scales, zp)
    assert out.dtype == row.dst.numpy
    np.testing.assert_array_equal(out.astype(F32), np.ones((2, 3), F32))


def test_static_ops_take_no_zps_type_rule() -> None:
    """Static zps are s64 attributes: zps-type does not apply, zps-value does."""
    out = R.quantize(X, scales=[1.0], zps=[1000], output_dtype=TensorProto.INT8)
    same(out, s8([127] * 4).reshape(1, 2, 2))
