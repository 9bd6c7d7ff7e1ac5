"""Real quantizer output (tests/test_real_models.py: quantize_static on CNN, transformer, LSTM, If,
function, Loop and Scan models, u8/s8 activations, per-channel/per-tensor weights) on oneDNN.

Two claims, model by model: oneDNN refuses no spec node of them (`inspect --backend onednn`
would list each), and the native backend in oneDNN's arithmetic computes exactly what oneDNN
computes, on whole models, subgraphs and functions included."""

from __future__ import annotations

import numpy as np
import pytest

import quantgraph
from quantgraph.runtime.support import REFUSED, RUNS, node_support
from tests.builders import requires_native, requires_onednn
from tests.test_real_models import CASES, converted, feeds

pytestmark = [requires_native, requires_onednn]


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", CASES)
def test_onednn_equals_native_in_onednns_arithmetic(case: str, static: bool) -> None:
    model = converted(case, static).proto
    onednn = quantgraph.InferenceSession(model, "onednn")
    native = quantgraph.InferenceSession(model, "native", arithmetic="onednn")
    for sample in feeds(case):
        for want, got in zip(native.run(None, sample), onednn.run(None, sample), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", CASES)
def test_no_node_is_refused_by_onednn(case: str) -> None:
    """Inside model-local functions and for Loop outputs ONNX's shape inference gives no types
    or shapes: those nodes are `unknown` to the per-node check (the whole-model test above runs
    them)."""
    found = node_support(converted(case, False).model, "onednn")
    assert REFUSED not in {s.status for s in found}, [s for s in found if s.status == REFUSED]
    assert sum(s.status == RUNS for s in found) >= 3
    if case.startswith(("cnn", "transformer", "lstm", "if_branch", "scan")):
        assert {s.status for s in found} == {RUNS}, [s for s in found if s.status != RUNS]
