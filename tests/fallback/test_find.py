"""quantgraph.fallback on models built where the answer is known: a clipped input, a coarse
weight scale, an unreachable target; local workers find what the in-process search finds."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import numpy_helper

import quantgraph
from quantgraph.errors import ModelError
from quantgraph.float_fallback.find import fallback, rank
from quantgraph.passes.floating.float_candidates import WEIGHTS
from tests.fallback.models import aliased_mlp, qdq, samples


def _clipped() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Calibrated on inputs five times smaller than those evaluated: x's Q clips."""
    floating = aliased_mlp()
    return floating, qdq(floating, samples(scale=0.2))


def _coarse_weight() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """fc2's weight scale made 8x coarser than quantize_static chose (codes rescaled)."""
    floating = aliased_mlp()
    quantized = qdq(floating, samples(32))
    by_name = {t.name: t for t in quantized.graph.initializer}
    codes = numpy_helper.to_array(by_name["w2_quantized"])
    scale = numpy_helper.to_array(by_name["w2_scale"])
    by_name["w2_quantized"].CopyFrom(
        numpy_helper.from_array(np.round(codes / 8).astype(codes.dtype), "w2_quantized")
    )
    by_name["w2_scale"].CopyFrom(
        numpy_helper.from_array((scale * 8).astype(scale.dtype), "w2_scale")
    )
    return floating, quantized


def test_a_clipped_input_ranks_first_and_is_kept() -> None:
    floating, quantized = _clipped()
    data = samples(8, seed=3)
    ranking = rank(ir.from_proto(floating), ir.from_proto(quantized), data)
    assert ranking[0].candidate.name == "x"
    result = fallback(floating, quantized, target=7.0, data=data, price=False)
    assert result.search.reached and result.search.kept == {"x"}
    assert result.search.best.quality >= 7.0 > result.baseline.quality
    assert result.search.evaluations <= 4  # the quantized model, a batch of two, their union


def test_a_coarse_weight_scale_is_found_as_that_nodes_weights() -> None:
    floating, quantized = _coarse_weight()
    data = samples(8, seed=4)
    ranking = rank(ir.from_proto(floating), ir.from_proto(quantized), data)
    weights = [r for r in ranking if r.candidate.kind == WEIGHTS]
    assert weights[0].candidate.name == "fc2"
    base = fallback(floating, quantized, target=1e9, data=data, price=False, max_evaluations=1)
    result = fallback(floating, quantized, target=base.baseline.quality + 3.0, data=data,
                      price=False)  # fmt: skip
    assert result.search.reached
    assert "fc2" in result.search.kept


def test_an_unreachable_target_says_so_and_gives_the_best_found() -> None:
    """Top-1 against labels even the float model mostly misses: no fallback reaches 90%."""
    floating, quantized = _clipped()
    data = samples(8, seed=3)
    labels = np.random.default_rng(9).integers(0, 8, len(data))

    def top1(outputs: list[dict[str, np.ndarray]]) -> float:
        return float(np.mean([np.argmax(o["y"]) == label for o, label in
                              zip(outputs, labels, strict=True)]))  # fmt: skip

    result = fallback(floating, quantized, target=0.9, metric=top1, data=data, price=False)
    assert not result.search.reached
    assert result.search.best.quality == max(p.quality for p in result.points)
    assert result.search.evaluations <= 20


def test_local_workers_find_what_one_process_finds() -> None:
    floating, quantized = _clipped()
    data = samples(8, seed=3)
    alone = fallback(floating, quantized, target=30.0, data=data, price=False)
    parallel = fallback(floating, quantized, target=30.0, data=data, workers=2, price=False)
    assert parallel.runner.startswith("2 local worker")
    assert parallel.search.kept == alone.search.kept
    assert [(p.kept, p.quality) for p in parallel.points] == [
        (p.kept, p.quality) for p in alone.points
    ]


def test_points_are_priced_with_fusion_auto_and_the_model_converts() -> None:
    floating, quantized = _clipped()
    result = fallback(floating, quantized, target=8.0, data=samples(4, seed=3))
    assert 2 <= len(result.points) <= 4
    assert all(p.ms is not None and p.ms > 0 for p in result.points)
    assert quantgraph.convert(result.model).report.converted


def test_a_user_metric_is_a_target() -> None:
    floating, quantized = _clipped()
    data = samples(8, seed=3)
    expected = [np.argmax(s["x"] @ np.ones((16, 8), np.float32)) for s in data]

    def agreement(outputs: list[dict[str, np.ndarray]]) -> float:
        float_outputs = fallback_reference(floating, data)
        return float(np.mean([np.argmax(o["y"]) == np.argmax(f) for o, f in
                              zip(outputs, float_outputs, strict=True)]))  # fmt: skip

    del expected
    result = fallback(floating, quantized, target=1.0, metric=agreement, data=data, price=False)
    assert result.metric == "user metric"
    assert result.search.reached and result.search.best.quality == 1.0


def fallback_reference(
    model: onnx.ModelProto, data: list[dict[str, np.ndarray]]
) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [session.run(None, d)[0] for d in data]


def test_swapped_arguments_are_named() -> None:
    floating, quantized = _clipped()
    with pytest.raises(ModelError, match="swapped"):
        fallback(quantized, floating, target=10.0, data=samples(2), price=False)
