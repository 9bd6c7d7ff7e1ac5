"""The places a float fallback acts on: one candidate per chain of aliases, one per weighted
node; keeping weights in float takes them from the float model."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
from onnx import numpy_helper

from quantgraph.passes.floating.float_candidates import CHAIN, WEIGHTS, float_candidates
from quantgraph.passes.floating.keep_float import keep_float
from tests.fallback.models import aliased_mlp, qdq, samples


def _run(model: ir.Model, feeds: dict[str, np.ndarray]) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(ir.to_proto(model).SerializeToString(), options)
    return np.asarray(session.run(None, feeds)[0])


def test_aliases_through_moving_ops_are_one_chain() -> None:
    model = ir.from_proto(qdq(aliased_mlp(), samples()))
    found = float_candidates(model)
    chains = [c for c in found if c.kind == CHAIN]
    by_first = {c.name: c for c in chains}
    assert set(by_first["hb"].names) == {"hb", "r1", "t1", "r2"}  # Add's output and 3 aliases
    assert "x" in by_first
    assert sum(len(c.names) for c in chains) == len({n for c in chains for n in c.names})
    # quantize_static quantizes the Add's constant too: bias1 has weights of its own
    assert {c.name for c in found if c.kind == WEIGHTS} == {"fc1", "bias1", "fc2"}
    assert "+3 aliases" in by_first["hb"].label


def test_keeping_a_node_weights_in_float_uses_the_float_models_weights() -> None:
    float_model = aliased_mlp()
    quantized = ir.from_proto(qdq(float_model, samples()))
    kept = keep_float(
        ir.from_proto(ir.to_proto(quantized)), ["fc2"], float_model=ir.from_proto(float_model)
    )
    fc2 = next(n for n in kept.graph if n.name == "fc2")
    weight = fc2.inputs[1]
    assert weight is not None and weight.const_value is not None
    w2 = next(t for t in float_model.graph.initializer if t.name == "w2")
    np.testing.assert_array_equal(weight.const_value.numpy(), numpy_helper.to_array(w2))
    assert not any(v.name == "w2_quantized" for v in kept.graph.initializers.values())
    # everything in float: the float model's output exactly
    every = [n for c in float_candidates(quantized) for n in c.names]
    all_float = keep_float(
        ir.from_proto(ir.to_proto(quantized)), every, float_model=ir.from_proto(float_model)
    )
    feeds = samples(1, seed=5)[0]
    np.testing.assert_array_equal(_run(all_float, feeds), _run(ir.from_proto(float_model), feeds))


def test_without_the_float_model_a_node_keeps_its_quantized_weights() -> None:
    quantized = ir.from_proto(qdq(aliased_mlp(), samples()))
    kept = keep_float(quantized, ["fc1"])
    fc1 = next(n for n in kept.graph if n.name == "fc1")
    assert fc1.inputs[0] is not None and fc1.inputs[0].name == "x"  # its activation: float
    weight = fc1.inputs[1].producer() if fc1.inputs[1] is not None else None
    assert weight is not None and weight.op_type == "DequantizeLinear"
