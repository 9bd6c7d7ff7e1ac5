"""Int4 weights in oneDNN partitions: an LLM's gated MLP, the one pattern in which oneDNN
(v3.7+, quantized_gated_mlp) fuses DynamicDequantize of 4-bit weights with MatMuls. Runs on the
default oneDNN (v3.2: no per_group, the plan says so) and, with QUANTGRAPH_ONEDNN_LIBRARY, on
v3.13: there oneDNN forms the partition, and either compiles it (outputs as the spec ops
compute them, up to float summation order) or, on a CPU without a kernel for it (AVX2: "could
not create a primitive descriptor for the matmul primitive"), the plan leaves the spec ops
alone with oneDNN's reason, though the batch dim is symbolic: never a failure at the first
run."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

import quantgraph
from quantgraph.backends import onednn
from tests import producers
from tests.builders import requires_onednn

pytestmark = requires_onednn


def _float_composition(model: object, x: np.ndarray) -> np.ndarray:
    """The original at ORT_DISABLE_ALL: DequantizeLinear then float MatMul, as the spec ops."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(),  # type: ignore[attr-defined]
        options,
        providers=["CPUExecutionProvider"],
    )
    result: np.ndarray = session.run(None, {"x": x})[0]
    return result


def test_gated_mlp_with_int4_weights_fuses_or_says_why() -> None:
    model = producers.gated_mlp()
    converted = quantgraph.convert(model).proto
    session = quantgraph.InferenceSession(converted, "native", fusion="onednn")
    plan = session.fusion_plan
    spec_ops = {"gate_DQ_Q4", "up_DQ_Q4", "down_DQ_Q4"}
    reasons = {a.node: a.reason for a in plan.alone}
    if onednn.version_tuple() < (3, 7, 0):
        assert not plan.units
        assert set(reasons) == spec_ops
        assert all("needs oneDNN v3.7+" in r for r in reasons.values()), reasons
    elif plan.units:
        (unit,) = plan.units
        assert set(unit.nodes) == spec_ops, plan.to_dict()
    else:
        assert set(reasons) == spec_ops
        assert all("oneDNN cannot compile its partition" in r for r in reasons.values())
        assert all("unknown dims as 1" in r for r in reasons.values()), reasons
    for tokens in (1, 5):  # the symbolic dim changes between runs
        x = np.random.default_rng(tokens).standard_normal((tokens, 64)).astype(np.float32)
        got = session.run(None, {"x": x})[0]
        want = _float_composition(model, x)
        if plan.units:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)
