"""Every validation rule of quantgraph.spec.RULES: a passing and a failing case, exact wording.

Messages have the form ``<Op> node '<name>': <text> [rule <id>]``. The expected strings below are
written out literally (not rebuilt from RULES) so a change of wording is a visible test change.
The data-type tables and attribute defaults are checked against the oneDNN Graph pages in
/work/shared/seeds and the notes (quantization-facts.md), transcribed here.
"""

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
    DEQUANTIZE,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    OPS,
    QUANTIZE,
    RULES,
    NodeFacts,
    SpecError,
    check_call,
    check_node,
    check_qtype,
    check_scale_values,
    check_shapes,
    check_static_attributes,
    check_types,
    dst_type,
    dtypes,
    resolve_axis,
)

F32 = np.float32
X = np.array([-1.0, 0.0, 1.0, 2.0], F32).reshape(1, 2, 2)  # the oneDNN unit-test src
XU8 = np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2)
X23 = np.arange(-3, 3, dtype=F32).reshape(1, 2, 3)
S1 = np.array([0.5], F32)
S2 = np.array([0.5, 0.25], F32)
S3 = np.array([0.5, 0.25, 1.0], F32)
INF, NAN = float("inf"), float("nan")


def f32(values: list[float]) -> np.ndarray:
    return np.asarray(values, F32)


def u8(values: list[int]) -> np.ndarray:
    return np.asarray(values, np.uint8)


def s8(values: list[int]) -> np.ndarray:
    return np.asarray(values, np.int8)


def s32(values: list[int]) -> np.ndarray:
    return np.asarray(values, np.int32)


@dataclass(frozen=True)
class Fail:
    rule: str
    call: Callable[[], Any]
    message: str


R = reference

FAILS: dict[str, Fail] = {
    # --- qtype -----------------------------------------------------------------------------
    "qtype/dynamic-quantize": Fail(
        "qtype",
        lambda: R.dynamic_quantize(X, S1, qtype="per_row", node="q"),
        "DynamicQuantize node 'q': qtype must be one of per_tensor, per_channel; "
        "got 'per_row' [rule qtype]",
    ),
    "qtype/case-sensitive": Fail(
        "qtype",
        lambda: R.dequantize(XU8, scales=[1.0], qtype="PER_TENSOR", node="d"),
        "Dequantize node 'd': qtype must be one of per_tensor, per_channel; "
        "got 'PER_TENSOR' [rule qtype]",
    ),
    "qtype/per-group-only-for-dynamic-dequantize": Fail(
        "qtype",
        lambda: R.dynamic_quantize(X, S1, qtype="per_group", node="q"),
        "DynamicQuantize node 'q': qtype must be one of per_tensor, per_channel; "
        "got 'per_group' [rule qtype]",
    ),
    "qtype/dynamic-dequantize-lists-per-group": Fail(
        "qtype",
        lambda: R.dynamic_dequantize(XU8, S1, qtype="per_row", node="dd"),
        "DynamicDequantize node 'dd': qtype must be one of per_tensor, per_channel, per_group; "
        "got 'per_row' [rule qtype]",
    ),
    "missing-attribute/group-shape": Fail(
        "missing-attribute",
        lambda: R.dynamic_dequantize(XU8, S1, qtype="per_group", node="dd"),
        "DynamicDequantize node 'dd': attribute 'group_shape' is required [rule missing-attribute]",
    ),
    # --- per_group -------------------------------------------------------------------------
    "group-shape-rank": Fail(
        "group-shape-rank",
        lambda: R.dynamic_dequantize(XU8, S1, qtype="per_group", group_shape=[1, 2], node="dd"),
        "DynamicDequantize node 'dd': group_shape must have one entry per src dim (3); got 2 "
        "[rule group-shape-rank]",
    ),
    "group-shape-value": Fail(
        "group-shape-value",
        lambda: R.dynamic_dequantize(
            XU8, S1.reshape(1, 1, 1), qtype="per_group", group_shape=[1, 0, 2], node="dd"
        ),
        "DynamicDequantize node 'dd': group_shape[1] = 0 must be positive [rule group-shape-value]",
    ),
    "group-scales-rank": Fail(
        "group-scales-rank",
        lambda: R.dynamic_dequantize(XU8, S1, qtype="per_group", group_shape=[1, 2, 2], node="dd"),
        "DynamicDequantize node 'dd': per_group needs scales of src's rank (3); got rank 1 "
        "[rule group-scales-rank]",
    ),
    "group-divides": Fail(
        "group-divides",
        lambda: R.dynamic_dequantize(
            XU8,
            f32([1.0, 2.0]).reshape(1, 1, 2),
            qtype="per_group",
            group_shape=[1, 2, 2],
            node="dd",
        ),
        "DynamicDequantize node 'dd': src dim 2 (2) must equal scales dim 2 (2) times "
        "group_shape[2] (2) [rule group-divides]",
    ),
    "group-zps-shape": Fail(
        "group-zps-shape",
        lambda: R.dynamic_dequantize(
            XU8,
            S1.reshape(1, 1, 1),
            u8([0, 0]),
            qtype="per_group",
            group_shape=[1, 2, 2],
            node="dd",
        ),
        "DynamicDequantize node 'dd': zps must have the shape of scales [1, 1, 1]; got [2] "
        "[rule group-zps-shape]",
    ),
    "qtype/check-function": Fail(
        "qtype",
        lambda: check_qtype(QUANTIZE, "n", ""),
        "Quantize node 'n': qtype must be one of per_tensor, per_channel; got '' [rule qtype]",
    ),
    # --- axis-range ------------------------------------------------------------------------
    "axis-range/too-high": Fail(
        "axis-range",
        lambda: R.dynamic_dequantize(XU8, S2, qtype="per_channel", axis=3, node="dd"),
        "DynamicDequantize node 'dd': axis 3 is out of range [-3, 2] for src of rank 3 "
        "[rule axis-range]",
    ),
    "axis-range/too-negative": Fail(
        "axis-range",
        lambda: R.quantize(X, scales=[0.1, 0.2], qtype="per_channel", axis=-4, node="q"),
        "Quantize node 'q': axis -4 is out of range [-3, 2] for src of rank 3 [rule axis-range]",
    ),
    "axis-range/rank-1": Fail(
        "axis-range",
        lambda: R.dynamic_quantize(f32([1, 2]), S2, qtype="per_channel", axis=1, node="q"),
        "DynamicQuantize node 'q': axis 1 is out of range [-1, 0] for src of rank 1 "
        "[rule axis-range]",
    ),
    # --- scales-rank -----------------------------------------------------------------------
    "scales-rank/2d": Fail(
        "scales-rank",
        lambda: R.dynamic_quantize(X, S1.reshape(1, 1), node="q"),
        "DynamicQuantize node 'q': scales must be a 1-D tensor; got rank 2 [rule scales-rank]",
    ),
    "scales-rank/scalar": Fail(
        "scales-rank",
        lambda: R.dynamic_dequantize(XU8, np.float32(0.5).reshape(()), node="dd"),
        "DynamicDequantize node 'dd': scales must be a 1-D tensor; got rank 0 [rule scales-rank]",
    ),
    # --- zps-rank --------------------------------------------------------------------------
    "zps-rank/2d": Fail(
        "zps-rank",
        lambda: R.dynamic_dequantize(XU8, S1, u8([[1]]), node="dd"),
        "DynamicDequantize node 'dd': zps must be a 1-D tensor; got rank 2 [rule zps-rank]",
    ),
    "zps-rank/scalar": Fail(
        "zps-rank",
        lambda: R.dynamic_quantize(X, S1, np.uint8(3).reshape(()), node="q"),
        "DynamicQuantize node 'q': zps must be a 1-D tensor; got rank 0 [rule zps-rank]",
    ),
    # --- per-tensor-scale-count ------------------------------------------------------------
    "per-tensor-scale-count/two": Fail(
        "per-tensor-scale-count",
        lambda: R.quantize(X, scales=[0.1, 0.2], node="q"),
        "Quantize node 'q': per_tensor needs exactly one scale; got 2 "
        "[rule per-tensor-scale-count]",
    ),
    "per-tensor-scale-count/none": Fail(
        "per-tensor-scale-count",
        lambda: R.dynamic_quantize(X, f32([]), node="q"),
        "DynamicQuantize node 'q': per_tensor needs exactly one scale; got 0 "
        "[rule per-tensor-scale-count]",
    ),
    # --- per-channel-scale-count -----------------------------------------------------------
    "per-channel-scale-count/default-axis": Fail(
        "per-channel-scale-count",
        lambda: R.dynamic_quantize(X, S3, qtype="per_channel", node="q"),
        "DynamicQuantize node 'q': per_channel needs one scale per element of src along axis 1 "
        "(2); got 3 [rule per-channel-scale-count]",
    ),
    "per-channel-scale-count/negative-axis": Fail(
        "per-channel-scale-count",
        lambda: R.dequantize(
            X23.astype(np.int8), scales=[0.1, 0.2], qtype="per_channel", axis=-1, node="d"
        ),
        "Dequantize node 'd': per_channel needs one scale per element of src along axis -1 "
        "(3); got 2 [rule per-channel-scale-count]",
    ),
    "per-channel-scale-count/one-scale": Fail(
        "per-channel-scale-count",
        lambda: R.dynamic_dequantize(XU8, S1, qtype="per_channel", axis=2, node="dd"),
        "DynamicDequantize node 'dd': per_channel needs one scale per element of src along "
        "axis 2 (2); got 1 [rule per-channel-scale-count]",
    ),
    # --- zps-count -------------------------------------------------------------------------
    "zps-count/per-tensor": Fail(
        "zps-count",
        lambda: R.dynamic_quantize(X, S1, u8([1, 2]), node="q"),
        "DynamicQuantize node 'q': zps must have as many elements as scales (1); got 2 "
        "[rule zps-count]",
    ),
    "zps-count/per-channel-static": Fail(
        "zps-count",
        lambda: R.quantize(X, scales=[0.1, 0.2], zps=[3], qtype="per_channel", node="q"),
        "Quantize node 'q': zps must have as many elements as scales (2); got 1 [rule zps-count]",
    ),
    # --- f8-zps ----------------------------------------------------------------------------
    "f8-zps/quantize-e4m3": Fail(
        "f8-zps",
        lambda: R.quantize(
            X, scales=[1.0], zps=[0], output_dtype=TensorProto.FLOAT8E4M3FN, node="q"
        ),
        "Quantize node 'q': zps are not allowed with f8_e4m3 [rule f8-zps]",
    ),
    "f8-zps/dequantize-e5m2": Fail(
        "f8-zps",
        lambda: R.dequantize(X.astype(ml_dtypes.float8_e5m2), scales=[1.0], zps=[0], node="d"),
        "Dequantize node 'd': zps are not allowed with f8_e5m2 [rule f8-zps]",
    ),
    "f8-zps/check-function": Fail(
        "f8-zps",
        lambda: check_static_attributes(DEQUANTIZE, "d", [1.0], [1], dtypes.F8_E4M3),
        "Dequantize node 'd': zps are not allowed with f8_e4m3 [rule f8-zps]",
    ),
    # --- scale-value (quantize ops only) ---------------------------------------------------
    "scale-value/zero": Fail(
        "scale-value",
        lambda: R.dynamic_quantize(X, f32([0.0]), node="q"),
        "DynamicQuantize node 'q': scales[0] = 0.0: quantize divides by the scale, so it must "
        "be finite and non-zero [rule scale-value]",
    ),
    "scale-value/negative-zero": Fail(
        "scale-value",
        lambda: R.quantize(X, scales=[-0.0], node="q"),
        "Quantize node 'q': scales[0] = -0.0: quantize divides by the scale, so it must be "
        "finite and non-zero [rule scale-value]",
    ),
    "scale-value/inf-second-channel": Fail(
        "scale-value",
        lambda: R.quantize(X, scales=[1.0, INF], qtype="per_channel", node="q"),
        "Quantize node 'q': scales[1] = inf: quantize divides by the scale, so it must be "
        "finite and non-zero [rule scale-value]",
    ),
    "scale-value/minus-inf": Fail(
        "scale-value",
        lambda: R.dynamic_quantize(X, f32([-INF]), u8([3]), node="q"),
        "DynamicQuantize node 'q': scales[0] = -inf: quantize divides by the scale, so it must "
        "be finite and non-zero [rule scale-value]",
    ),
    "scale-value/nan": Fail(
        "scale-value",
        lambda: R.dynamic_quantize(X, f32([0.5, NAN]), qtype="per_channel", node="q"),
        "DynamicQuantize node 'q': scales[1] = nan: quantize divides by the scale, so it must "
        "be finite and non-zero [rule scale-value]",
    ),
    "scale-value/check-function": Fail(
        "scale-value",
        lambda: check_scale_values(QUANTIZE, "q", f32([1.0, 2.0, 0.0])),
        "Quantize node 'q': scales[2] = 0.0: quantize divides by the scale, so it must be "
        "finite and non-zero [rule scale-value]",
    ),
    # --- zps-value -------------------------------------------------------------------------
    "zps-value/above-s32": Fail(
        "zps-value",
        lambda: R.quantize(X, scales=[1.0], zps=[2**31], node="q"),
        "Quantize node 'q': zps[0] = 2147483648 does not fit in s32 [rule zps-value]",
    ),
    "zps-value/below-s32": Fail(
        "zps-value",
        lambda: R.dequantize(
            XU8, scales=[1.0, 1.0], zps=[0, -(2**31) - 1], qtype="per_channel", node="d"
        ),
        "Dequantize node 'd': zps[1] = -2147483649 does not fit in s32 [rule zps-value]",
    ),
    # --- src-type --------------------------------------------------------------------------
    "src-type/dynamic-dequantize-s32": Fail(
        "src-type",
        lambda: R.dynamic_dequantize(X.astype(np.int32), S1, node="dd"),
        "DynamicDequantize node 'dd': src type s32 is not supported (allowed: s8, u8, s4, u4) "
        "[rule src-type]",
    ),
    "src-type/dequantize-f32": Fail(
        "src-type",
        lambda: R.dequantize(X, scales=[1.0], node="d"),
        "Dequantize node 'd': src type f32 is not supported "
        "(allowed: s8, u8, f8_e4m3, f8_e5m2) [rule src-type]",
    ),
    "src-type/dynamic-quantize-s8": Fail(
        "src-type",
        lambda: R.dynamic_quantize(X.astype(np.int8), S1, node="q"),
        "DynamicQuantize node 'q': src type s8 is not supported (allowed: f32) [rule src-type]",
    ),
    "src-type/dynamic-dequantize-f8": Fail(
        "src-type",
        lambda: R.dynamic_dequantize(X.astype(ml_dtypes.float8_e4m3fn), S1, node="dd"),
        "DynamicDequantize node 'dd': src type f8_e4m3 is not supported (allowed: s8, u8, s4, u4) "
        "[rule src-type]",
    ),
    # --- dst-type --------------------------------------------------------------------------
    "dst-type/dynamic-s32": Fail(
        "dst-type",
        lambda: R.dynamic_quantize(X, S1, output_dtype=TensorProto.INT32, node="q"),
        "DynamicQuantize node 'q': dst type s32 is not supported (allowed: s8, u8) [rule dst-type]",
    ),
    "dst-type/dynamic-f8": Fail(
        "dst-type",
        lambda: R.dynamic_quantize(X, S1, output_dtype=TensorProto.FLOAT8E4M3FN, node="q"),
        "DynamicQuantize node 'q': dst type f8_e4m3 is not supported (allowed: s8, u8) "
        "[rule dst-type]",
    ),
    "dst-type/static-f32": Fail(
        "dst-type",
        lambda: R.quantize(X, scales=[1.0], output_dtype=TensorProto.FLOAT, node="q"),
        "Quantize node 'q': dst type f32 is not supported (allowed: s8, u8, f8_e4m3, f8_e5m2) "
        "[rule dst-type]",
    ),
    "dst-type/static-int16": Fail(
        "dst-type",
        lambda: R.quantize(X, scales=[1.0], output_dtype=TensorProto.INT16, node="q"),
        "Quantize node 'q': dst type int16 is not supported "
        "(allowed: s8, u8, f8_e4m3, f8_e5m2) [rule dst-type]",
    ),
    # --- scales-type -----------------------------------------------------------------------
    "scales-type/s32": Fail(
        "scales-type",
        lambda: R.dynamic_quantize(X, S1.astype(np.int32), node="q"),
        "DynamicQuantize node 'q': scales type s32 is not supported (allowed: f32) "
        "[rule scales-type]",
    ),
    "scales-type/u8": Fail(
        "scales-type",
        lambda: R.dynamic_dequantize(XU8, u8([1]), node="dd"),
        "DynamicDequantize node 'dd': scales type u8 is not supported (allowed: f32) "
        "[rule scales-type]",
    ),
    # --- zps-type --------------------------------------------------------------------------
    "zps-type/f32": Fail(
        "zps-type",
        lambda: R.dynamic_quantize(X, S1, f32([0.0]), node="q"),
        "DynamicQuantize node 'q': zps type f32 is not supported (allowed: s8, u8, s32) "
        "[rule zps-type]",
    ),
    "zps-type/f8": Fail(
        "zps-type",
        lambda: R.dynamic_dequantize(XU8, S1, f32([0.0]).astype(ml_dtypes.float8_e5m2), node="d"),
        "DynamicDequantize node 'd': zps type f8_e5m2 is not supported (allowed: s8, u8, s32) "
        "[rule zps-type]",
    ),
    # --- missing-input ---------------------------------------------------------------------
    "missing-input/check-types-dict": Fail(
        "missing-input",
        lambda: check_types(
            DYNAMIC_QUANTIZE,
            "q",
            {"src": TensorProto.FLOAT, "dst": TensorProto.UINT8, "scales": None, "zps": None},
        ),
        "DynamicQuantize node 'q': input 'scales' is required [rule missing-input]",
    ),
    "missing-input/check-types-no-scales-key": Fail(
        "missing-input",
        lambda: check_types(
            DYNAMIC_DEQUANTIZE, "dd", {"src": TensorProto.UINT8, "dst": TensorProto.FLOAT}
        ),
        "DynamicDequantize node 'dd': input 'scales' is required [rule missing-input]",
    ),
    # --- missing-attribute -----------------------------------------------------------------
    "missing-attribute/quantize": Fail(
        "missing-attribute",
        lambda: R.quantize(X, scales=None, node="q"),  # type: ignore[arg-type]
        "Quantize node 'q': attribute 'scales' is required [rule missing-attribute]",
    ),
    "missing-attribute/dequantize": Fail(
        "missing-attribute",
        lambda: R.dequantize(XU8, scales=None, node="d"),  # type: ignore[arg-type]
        "Dequantize node 'd': attribute 'scales' is required [rule missing-attribute]",
    ),
    "missing-attribute/check-function": Fail(
        "missing-attribute",
        lambda: check_static_attributes(QUANTIZE, "q", None, None, dtypes.U8),
        "Quantize node 'q': attribute 'scales' is required [rule missing-attribute]",
    ),
    # --- attribute-kind --------------------------------------------------------------------
    "attribute-kind/qtype-int": Fail(
        "attribute-kind",
        lambda: R.dynamic_quantize(X, S1, qtype=1, node="q"),
        "DynamicQuantize node 'q': attribute 'qtype' must be of kind string [rule attribute-kind]",
    ),
    "attribute-kind/scales-strings": Fail(
        "attribute-kind",
        lambda: R.dequantize(XU8, scales=["1"], node="d"),
        "Dequantize node 'd': attribute 'scales' must be of kind floats [rule attribute-kind]",
    ),
    # --- output-type -----------------------------------------------------------------------
    "output-type/declared-s8-zps-u8": Fail(
        "output-type",
        lambda: check_node(DYNAMIC_QUANTIZE, "q", _declared_facts(TensorProto.INT8)),
        "DynamicQuantize node 'q': output type s8 differs from the dst type u8 of the node's "
        "attributes and inputs [rule output-type]",
    ),
}


@pytest.mark.parametrize("case_id", list(FAILS))
def test_rule_violation_message(case_id: str) -> None:
    case = FAILS[case_id]
    with pytest.raises(SpecError) as caught:
        case.call()
    error = caught.value
    assert str(error) == case.message
    assert error.rule == case.rule
    assert isinstance(error, ValueError)


def test_every_rule_has_a_failing_case() -> None:
    assert {case.rule for case in FAILS.values()} == set(RULES)


def test_message_format_is_op_node_text_rule() -> None:
    error = SpecError("Quantize", "my node", "missing-attribute", name="scales")
    assert str(error) == (
        "Quantize node 'my node': attribute 'scales' is required [rule missing-attribute]"
    )
    assert (error.op, error.node, error.rule) == ("Quantize", "my node", "missing-attribute")
    assert error.detail == "attribute 'scales' is required"
    assert error.fields == {"name": "scales"}


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


def _declared_facts(declared: int) -> NodeFacts:
    """A DynamicQuantize with u8 zps whose output the model declares ``declared``."""
    return NodeFacts(
        src=TensorProto.FLOAT,
        scales=TensorProto.FLOAT,
        zps=TensorProto.UINT8,
        has_zps=True,
        declared_dst=declared,
    )


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
        lambda: np.array(check_node(DYNAMIC_QUANTIZE, "q", _declared_facts(TensorProto.UINT8)).dst),
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


def _same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)
    if actual.dtype.kind == "f":  # signed zeros matter too (NaN signs do not)
        numbers = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(actual[numbers]), np.signbit(expected[numbers]))


@pytest.mark.parametrize("case_id", list(PASSES))
def test_rule_satisfied(case_id: str) -> None:
    case = PASSES[case_id]
    _same(case.call(), case.expected)


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
    _same(out, s8([127] * 4).reshape(1, 2, 2))


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
            lambda: R.dynamic_quantize(X, None, node="q"),
            "DynamicQuantize node 'q': input 'scales' is required [rule missing-input]",
        ),
        (
            lambda: R.dynamic_dequantize(XU8, None, node="dd"),
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
    _same(R.dynamic_quantize(X, S1), explicit)
    per_channel = R.dequantize(XU8, scales=[1.0, 2.0], qtype="per_channel")
    _same(per_channel, R.dequantize(XU8, scales=[1.0, 2.0], qtype="per_channel", axis=1))
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
            assert d.float8_max == float(ml_dtypes.finfo(d.numpy).max)
        elif d.numpy.kind in "iu":
            info = np.iinfo(d.numpy)
            assert d.int_range == (info.min, info.max)
    assert dtypes.F8_E4M3.float8_max == 448.0
    assert dtypes.F8_E5M2.float8_max == 57344.0
    assert dtypes.from_onnx(TensorProto.DOUBLE) is None
    assert dtypes.onnx_name(TensorProto.DOUBLE) == "double"
    assert dtypes.onnx_name(TensorProto.INT8) == "s8"
