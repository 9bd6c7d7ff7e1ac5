"""Arrays and constructors the spec-rule tests share (tests/test_spec_rules*.py,
tests/test_spec_checks.py): the oneDNN unit-test src and a few scales."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from onnx import TensorProto

from quantgraph.spec import NodeFacts

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


def u8(values: npt.ArrayLike) -> np.ndarray:  # nested lists too: tests of the rank rules
    return np.asarray(values, np.uint8)


def s8(values: list[int]) -> np.ndarray:
    return np.asarray(values, np.int8)


def s32(values: list[int]) -> np.ndarray:
    return np.asarray(values, np.int32)


def declared_facts(declared: int) -> NodeFacts:
    """A DynamicQuantize with u8 zps whose output the model declares ``declared``."""
    return NodeFacts(
        src=TensorProto.FLOAT,
        scales=TensorProto.FLOAT,
        zps=TensorProto.UINT8,
        has_zps=True,
        declared_dst=declared,
    )


def same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)
    if actual.dtype.kind == "f":  # signed zeros matter too (NaN signs do not)
        numbers = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(actual[numbers]), np.signbit(expected[numbers]))
