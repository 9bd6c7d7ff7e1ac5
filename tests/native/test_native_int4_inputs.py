"""A 4-bit zero point fed as a graph input, as ONNX's own backend cases ship it.

The rewrite makes a run-time scalar zero point 1-D (the spec's zps are 1-D) and lowering makes it
a scalar again; onnxruntime has no 4-bit Reshape, so both go through an 8-bit Cast. The cases
``test_dequantizelinear_int4`` and ``test_dequantizelinear_uint4`` of
``onnx.backend.test.case.node.collect_testcases`` once failed to load ("Could not find an
implementation for Reshape(25)").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases

import quantgraph
from quantgraph.spec import DOMAIN
from quantgraph.testing import from_ort_value, ort_session, to_ort_value
from tests.native.native_support import requires_native

pytestmark = requires_native
CASES = ("test_dequantizelinear_int4", "test_dequantizelinear_uint4")


def _shipped(name: str) -> Any:
    """ONNX's node test case ``name``. Importing the DequantizeLinear module registers its cases
    (~1 s); collect_testcases(None) generates every op's (~20 s), used if that changes."""
    import onnx.backend.test.case.node as node_cases
    import onnx.backend.test.case.node.dequantizelinear  # noqa: F401

    found = [c for c in getattr(node_cases, "_NodeTestCases", []) if c.name == name]
    return found[0] if found else next(c for c in collect_testcases(None) if c.name == name)


def _case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], np.ndarray]:
    case = _shipped(name)
    model = case.model
    for opset in model.opset_import:  # onnxruntime 1.32 runs opsets up to 25
        if opset.domain in ("", "ai.onnx"):
            opset.version = min(opset.version, 25)
    inputs, outputs = case.data_sets[0]

    def array(value: object) -> np.ndarray:
        if isinstance(value, onnx.TensorProto):
            return numpy_helper.to_array(value)
        return np.asarray(value)

    feeds = {i.name: array(v) for i, v in zip(model.graph.input, inputs, strict=True)}
    return model, feeds, array(outputs[0])


def _run(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> np.ndarray:
    values = {name: to_ort_value(array) for name, array in feeds.items()}
    (out,) = session.run_with_ort_values(None, values)
    return from_ort_value(out)


@pytest.mark.parametrize("name", CASES)
def test_a_4_bit_zero_point_input_converts_runs_and_lowers(name: str) -> None:
    model, feeds, expected = _case(name)
    assert model.graph.input[2].type.tensor_type.elem_type in (
        onnx.TensorProto.INT4,
        onnx.TensorProto.UINT4,
    )  # the zero point is a graph input, as shipped
    converted = quantgraph.convert(model).model
    assert any(n.domain == DOMAIN for n in converted.graph)
    got = _run(quantgraph.InferenceSession(converted, "native"), feeds)
    np.testing.assert_array_equal(got, expected, strict=True)

    original = ort_session(model)
    np.testing.assert_array_equal(got, _run(original, feeds), strict=True)

    lowered = quantgraph.lower(converted).model
    assert not any(n.domain == DOMAIN for n in lowered.graph)
    again = ort_session(ir.to_proto(lowered))
    np.testing.assert_array_equal(_run(again, feeds), expected, strict=True)
