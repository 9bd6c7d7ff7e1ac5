"""Every rule of quantgraph.spec: the native library rejects the call with exactly the message
quantgraph.spec.SpecError has for it (as an onnxruntime error, at session creation when the
node alone decides, else at run time), and the process carries on."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto

from quantgraph import reference
from quantgraph.spec import OPS, RULES, SpecError, dtypes
from tests.native.native_support import (
    native_session,
    onnx_type,
    requires_native,
    run_native,
    run_session,
    spec_model,
)

pytestmark = requires_native

F32 = np.float32
X23 = np.arange(6, dtype=F32).reshape(2, 3)
Q23 = np.arange(6, dtype=np.int8).reshape(2, 3)
S1 = np.array([0.5], F32)
H1 = np.array([0.5], np.float16)
B1 = np.array([0.5], dtypes.BF16.numpy)
H13 = np.ones((1, 3), np.float16)
S4_23 = np.array([[-8, 7, 1], [0, -1, 3]], dtypes.S4.numpy)
U4_23 = np.array([[0, 15, 1], [7, 8, 3]], dtypes.U4.numpy)


@dataclass
class Case:
    """One broken rule: the native call and what the reference says about the same call."""

    rule: str
    op: str
    src: np.ndarray
    scales: np.ndarray | None = None
    zps: np.ndarray | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    # The reference's SpecError for the call; None: run the call on reference.run to get it.
    expected: Callable[[], SpecError] | None = None
    extra_inputs: tuple[str, ...] = ()
    out_type: int | None = None  # the declared type of the graph output; None: undeclared
    # onnxruntime's own error where it rejects the model before the kernel exists (a regex);
    # should a runtime let the model through, the kernel must raise the spec's message.
    ort_rejects: str | None = None


def static(rule: str, op: str, src: np.ndarray, **attrs: Any) -> Case:
    return Case(rule, op, src, attrs=attrs)


def dynamic(rule: str, op: str, src: np.ndarray, scales: Any, zps: Any = None, **a: Any) -> Case:
    return Case(rule, op, src, scales, zps, attrs=a)


CASES = [
    static("qtype", "Quantize", X23, scales=[1.0], qtype="per_row"),
    dynamic("qtype", "DynamicDequantize", Q23, S1, qtype="PER_TENSOR"),
    static("axis-range", "Quantize", X23, scales=[1.0, 1.0], qtype="per_channel", axis=2),
    static("axis-range", "Dequantize", Q23, scales=[1.0, 1.0], qtype="per_channel", axis=-3),
    dynamic("axis-range", "DynamicQuantize", np.array(1.0, F32), S1, qtype="per_channel", axis=0),
    dynamic("scales-rank", "DynamicQuantize", X23, np.array([[0.5]], F32)),
    dynamic("scales-rank", "DynamicDequantize", Q23, np.array(0.5, F32)),
    dynamic("zps-rank", "DynamicDequantize", Q23, S1, np.array([[1]], np.int8)),
    dynamic("zps-rank", "DynamicQuantize", X23, S1, np.array(1, np.uint8)),
    static("per-tensor-scale-count", "Quantize", X23, scales=[1.0, 2.0]),
    static("per-tensor-scale-count", "Dequantize", Q23, scales=[]),
    dynamic("per-tensor-scale-count", "DynamicQuantize", X23, np.array([1, 2], F32)),
    static("per-channel-scale-count", "Quantize", X23, scales=[1.0, 2.0], qtype="per_channel"),
    dynamic("per-channel-scale-count", "DynamicDequantize", Q23, S1, qtype="per_channel", axis=-2),
    static("zps-count", "Quantize", X23, scales=[1.0], zps=[1, 2]),
    static("zps-count", "Dequantize", Q23, scales=[1.0, 1.0, 1.0], zps=[1], qtype="per_channel"),
    dynamic("zps-count", "DynamicQuantize", X23, S1, np.array([1, 2], np.int32)),
    static("f8-zps", "Quantize", X23, scales=[1.0], zps=[0], output_dtype=TensorProto.FLOAT8E5M2),
    Case(
        "f8-zps",
        "Dequantize",
        np.zeros((2, 3), np.uint8).view(dtypes.F8_E4M3.numpy),
        attrs={"scales": [1.0], "zps": [0]},
    ),
    static("scale-value", "Quantize", X23, scales=[0.0]),
    static("scale-value", "Quantize", X23, scales=[-0.0]),
    static("scale-value", "Quantize", X23, scales=[1.0, float("inf"), 1.0], qtype="per_channel"),
    dynamic(
        "scale-value", "DynamicQuantize", X23, np.array([1, 2, np.nan], F32), qtype="per_channel"
    ),
    dynamic("scale-value", "DynamicQuantize", X23, np.array([-np.inf], F32)),
    static("zps-value", "Quantize", X23, scales=[1.0], zps=[2**31]),
    static("zps-value", "Dequantize", Q23, scales=[1.0, 1.0], zps=[0, -(2**31) - 1]),
    static("src-type", "Quantize", Q23, scales=[1.0]),
    static("src-type", "Dequantize", X23, scales=[1.0]),
    dynamic("src-type", "DynamicDequantize", X23.astype(np.int32), S1),
    static("dst-type", "Quantize", X23, scales=[1.0], output_dtype=TensorProto.INT32),
    static("dst-type", "Quantize", X23, scales=[1.0], output_dtype=999),
    dynamic("dst-type", "DynamicQuantize", X23, S1, output_dtype=TensorProto.FLOAT8E4M3FN),
    dynamic("scales-type", "DynamicQuantize", X23, np.array([1], np.int32)),
    dynamic("scales-type", "DynamicDequantize", Q23, np.array([1], np.uint8)),
    dynamic("zps-type", "DynamicQuantize", X23, S1, np.array([1], F32), output_dtype=2),
    dynamic("zps-type", "DynamicDequantize", Q23, S1, np.array([1], F32)),
    # A type outside the spec: the message is the rule's wording with the ONNX type's name.
    Case(
        "src-type",
        "DynamicQuantize",
        X23.astype(np.float64),
        S1,
        expected=lambda: SpecError(
            "DynamicQuantize", "node", "src-type", got="double", allowed="f32"
        ),
    ),
    # The v3.13 DynamicDequantize rows: 4-bit and f16/bf16 types, per_group.
    dynamic("src-type", "DynamicQuantize", X23.astype(np.float16), S1),
    dynamic("src-type", "DynamicDequantize", X23.astype(np.float16), S1.astype(np.float16)),
    dynamic("scales-type", "DynamicDequantize", S4_23, np.array([1], np.int32)),
    dynamic("scales-type", "DynamicDequantize", Q23, np.array([1], np.float64)),
    dynamic("zps-type", "DynamicDequantize", U4_23, S1, np.array([1], np.int8)),
    dynamic("zps-type", "DynamicDequantize", S4_23, H1, np.array([1], dtypes.U4.numpy)),
    dynamic("zps-type", "DynamicDequantize", Q23, B1, np.array([1], dtypes.S4.numpy)),
    dynamic("qtype", "DynamicDequantize", S4_23, H1, qtype="per_block"),
    static("qtype", "Dequantize", Q23, scales=[1.0], qtype="per_group"),
    dynamic("qtype", "DynamicQuantize", X23, S1, qtype="per_group", group_shape=[1, 3]),
    dynamic("missing-attribute", "DynamicDequantize", S4_23, H13, qtype="per_group"),
    dynamic(
        "group-shape-rank", "DynamicDequantize", S4_23, H13, qtype="per_group", group_shape=[2]
    ),
    dynamic(
        "group-shape-rank",
        "DynamicDequantize",
        Q23,
        np.ones((1, 3, 1), F32),
        qtype="per_group",
        group_shape=[2, 1, 1],
    ),
    dynamic(
        "group-shape-value",
        "DynamicDequantize",
        U4_23,
        H13,
        qtype="per_group",
        group_shape=[2, 0],
    ),
    dynamic(
        "group-shape-value",
        "DynamicDequantize",
        Q23,
        S1,
        qtype="per_group",
        group_shape=[-2, 1],
    ),
    dynamic(
        "group-scales-rank",
        "DynamicDequantize",
        S4_23,
        np.ones(3, np.float16),
        qtype="per_group",
        group_shape=[2, 1],
    ),
    dynamic(
        "group-divides",
        "DynamicDequantize",
        Q23,
        np.ones((1, 2), F32),
        qtype="per_group",
        group_shape=[2, 1],
    ),
    dynamic(
        "group-divides",
        "DynamicDequantize",
        U4_23,
        np.ones((2, 1), dtypes.BF16.numpy),
        qtype="per_group",
        group_shape=[2, 3],
    ),
    dynamic(
        "group-zps-shape",
        "DynamicDequantize",
        S4_23,
        H13,
        np.zeros((1, 1), dtypes.S4.numpy),
        qtype="per_group",
        group_shape=[2, 1],
    ),
    dynamic(
        "group-zps-shape",
        "DynamicDequantize",
        Q23,
        np.ones((1, 3), F32),
        np.zeros(3, np.int8),
        qtype="per_group",
        group_shape=[2, 1],
    ),
    dynamic(
        "attribute-kind",
        "DynamicDequantize",
        S4_23,
        H13,
        qtype="per_group",
        group_shape=[2.0, 1.0],
    ),
    # f16 scales make the dst f16; a graph declaring f32 is rejected by onnxruntime itself.
    Case(
        "output-type",
        "DynamicDequantize",
        S4_23,
        H1,
        out_type=TensorProto.FLOAT,
        expected=lambda: SpecError(
            "DynamicDequantize", "node", "output-type", got="f32", dst="f16"
        ),
        ort_rejects=(
            r"Type Error: Type \(tensor\(float\)\) of output arg \(dst\) of node \(node\) "
            r"does not match expected type \(tensor\(float16\)\)"
        ),
    ),
    Case(
        "missing-input",
        "DynamicQuantize",
        X23,
        expected=lambda: SpecError("DynamicQuantize", "node", "missing-input", name="scales"),
    ),
    Case(
        "missing-input",
        "DynamicDequantize",
        Q23,
        zps=np.array([1], np.int8),  # scales given as '' (absent), zps present
        expected=lambda: SpecError("DynamicDequantize", "node", "missing-input", name="scales"),
    ),
    static("missing-attribute", "Quantize", X23),
    static("missing-attribute", "Dequantize", Q23, zps=[1]),
    static("attribute-kind", "Quantize", X23, scales=[1.0], qtype=1),
    static("attribute-kind", "Quantize", X23, scales=[1.0], zps=(1.5,)),  # a tuple: FLOATS
    dynamic("attribute-kind", "DynamicQuantize", X23, S1, output_dtype=2.0),
    Case(
        "attribute-kind",
        "Dequantize",
        Q23,
        # A tuple of ints becomes an INTS attribute (lists become FLOATS). The reference takes
        # Python ints as floats; an ONNX node's INTS attribute is of the wrong kind.
        attrs={"scales": (1, 2)},
        expected=lambda: SpecError(
            "Dequantize", "node", "attribute-kind", name="scales", kind="floats"
        ),
    ),
    static("attribute-kind", "Quantize", X23, scales=[1.0], axis="one"),
    # The zps decide the dst (u8); the graph declares s8. onnxruntime infers the node's output
    # type through the library (the same ResolveDst) and rejects the model itself, so the
    # kernel's check is a safety net that no model reaches today.
    Case(
        "output-type",
        "DynamicQuantize",
        X23,
        S1,
        np.array([1], np.uint8),
        out_type=TensorProto.INT8,
        expected=lambda: SpecError("DynamicQuantize", "node", "output-type", got="s8", dst="u8"),
        ort_rejects=(
            r"Type Error: Type \(tensor\(int8\)\) of output arg \(dst\) of node \(node\) "
            r"does not match expected type \(tensor\(uint8\)\)"
        ),
    ),
]


def expected_error(case: Case) -> SpecError:
    if case.expected is not None:
        return case.expected()
    inputs = [case.src] if OPS[case.op].is_static else [case.src, case.scales, case.zps]
    with pytest.raises(SpecError) as raised:
        reference.run(case.op, inputs, case.attrs, node="node")
    return raised.value


def run_case(case: Case) -> None:
    model = spec_model(
        case.op,
        onnx_type(case.src),
        case.src.ndim,
        scales_type=None if case.scales is None else onnx_type(case.scales),
        zps_type=None if case.zps is None else onnx_type(case.zps),
        out_type=case.out_type,
        **case.attrs,
    )
    # Concrete shapes: the rules about ranks need them.
    for value_info, array in zip(
        model.graph.input,
        [a for a in (case.src, case.scales, case.zps) if a is not None],
        strict=True,
    ):
        dims = value_info.type.tensor_type.shape.dim
        del dims[:]
        for d in array.shape:
            dims.add().dim_value = d
    session = native_session(model)
    feeds = {"src": case.src}
    if case.scales is not None:
        feeds["scales"] = case.scales
    if case.zps is not None:
        feeds["zps"] = case.zps
    run_session(session, feeds)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.op}")
def test_rule_message(case: Case) -> None:
    expected = expected_error(case)
    assert expected.rule == case.rule
    with pytest.raises(Exception) as raised:
        run_case(case)
    message = str(raised.value)
    rejected_by_ort = case.ort_rejects is not None and re.search(case.ort_rejects, message)
    if not rejected_by_ort:  # else onnxruntime decided before the kernel existed
        assert message.endswith(str(expected)), f"\n got: {message}\nwant: ...{expected}"
    # The process carries on: a good call right after works.
    good = run_native("DynamicQuantize", X23, S1, np.array([3], np.int8))
    assert good.tolist() == [[3, 5, 7], [9, 11, 13]]


def test_every_rule_is_exercised() -> None:
    assert {c.rule for c in CASES} == set(RULES)


def test_errors_at_creation_and_at_run_time() -> None:
    """The node alone decides attributes and types (session creation); shapes and dynamic
    scale values only exist at run time, so the same session fails one run and not the next."""
    with pytest.raises(Exception, match=r"Exception during initialization: Quantize node"):
        run_case(static("scale-value", "Quantize", X23, scales=[0.0]))
    model = spec_model("DynamicQuantize", TensorProto.FLOAT, 2, scales_type=TensorProto.FLOAT)
    session = native_session(model)
    with pytest.raises(Exception, match=r"\[rule scale-value\]"):
        run_session(session, {"src": X23, "scales": np.array([0.0], F32)})
    with pytest.raises(Exception, match=r"\[rule per-tensor-scale-count\]"):
        run_session(session, {"src": X23, "scales": np.array([1.0, 2.0], F32)})
    out = run_session(session, {"src": X23, "scales": S1})
    assert out.dtype == np.uint8 and out.tolist() == [[0, 2, 4], [6, 8, 10]]


def test_wrong_attribute_kind_is_an_error_not_a_crash() -> None:
    model = spec_model("Quantize", TensorProto.FLOAT, 2, scales=[1.0], axis="one")
    expected = SpecError("Quantize", "node", "attribute-kind", name="axis", kind="int")
    with pytest.raises(Exception, match=re.escape(str(expected))):
        native_session(model)


def test_inference_session_surfaces_the_message() -> None:
    """quantgraph.InferenceSession(backend='native') surfaces the same text."""
    import quantgraph

    model = spec_model("Quantize", TensorProto.FLOAT, 2, scales=[1.0, 2.0])
    expected = expected_error(static("per-tensor-scale-count", "Quantize", X23, scales=[1.0, 2.0]))
    with pytest.raises(Exception) as raised:
        quantgraph.InferenceSession(model, "native")
    assert str(expected) in str(raised.value)
