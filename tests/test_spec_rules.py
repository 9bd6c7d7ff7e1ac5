"""Every validation rule of quantgraph.spec.RULES, failing: the exact message of each broken rule
(the passing cases: test_spec_rules_passing.py; the check functions and the type tables:
test_spec_checks.py).

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
    QUANTIZE,
    RULES,
    SpecError,
    check_node,
    check_qtype,
    check_scale_values,
    check_static_attributes,
    check_types,
    dtypes,
)
from tests.spec_values import INF, NAN, S1, S2, S3, X23, XU8, X, declared_facts, f32, u8


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
        lambda: R.dynamic_dequantize(XU8, np.array(0.5, np.float32), node="dd"),
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
        lambda: R.dynamic_quantize(X, S1, np.array(3, np.uint8), node="q"),
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
        lambda: R.quantize(X, scales=None, node="q"),
        "Quantize node 'q': attribute 'scales' is required [rule missing-attribute]",
    ),
    "missing-attribute/dequantize": Fail(
        "missing-attribute",
        lambda: R.dequantize(XU8, scales=None, node="d"),
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
        lambda: check_node(DYNAMIC_QUANTIZE, "q", declared_facts(TensorProto.INT8)),
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
