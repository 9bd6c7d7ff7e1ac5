"""fusion "auto" always has the original's own form as a candidate (issue #42, "what must
hold" 3): every spec op lowered back in memory as `lower` writes them and run by onnxruntime,
so that auto's worst case is the original's speed. With injected timings it wins where it is
fastest and the session then computes what the original computes (identical to the original at
ORT_ENABLE_ALL); it is no candidate for oneDNN's plans to hide behind. On a model whose weights
live in external data it hands them to onnxruntime by reference. The GRU decoder step of issue
#42 item 9, and the reason a 4-bit MatMul's unit gives where oneDNN forms nothing (#41 item 4).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

import quantgraph
from quantgraph.backends import onednn
from quantgraph.fusion.auto import auto_tuning, tuner
from quantgraph.fusion.auto.tuner import BASELINE, MARGIN, choices, decide
from quantgraph.fusion.ort import original_form
from quantgraph.fusion.plan import ORIGINAL
from quantgraph.runtime import weights_by_reference
from quantgraph.runtime.session import NOTHING_TO_TIME
from quantgraph.validation import make_inputs
from tests import producers
from tests.builders import requires_onednn

ROOT = Path(__file__).resolve().parent.parent

# name -> the original, as each producer writes it
MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "qdq_cnn": lambda: onnx.load(ROOT / "models" / "cnn_u8.onnx"),
    "qdq_transformer": lambda: onnx.load(ROOT / "models" / "transformer_u8.onnx"),
    "gru_step_dynamic": producers.gru_step,
    "qoperator_cnn": lambda: producers.static_quantized(qoperator=True),
    "matmul_nbits": lambda: producers.weight_only(64, 32, False, qoperator=True),
}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(tmp_path / "cache"))


def _timings(monkeypatch: pytest.MonkeyPatch, ratios: Mapping[str, float]) -> list[list[str]]:
    """The measurement replaced: each candidate's session runs once (it must work), then every
    candidate asked for, twins too (plans making one model), takes ``ratios[name]`` (1.0 for
    the others) times 0.1 ms every round."""
    calls: list[list[str]] = []

    def timed(timing: auto_tuning.Timing, budget: float) -> tuner.Measure:
        def measure(asked: Sequence[tuner.Choice]) -> tuner.Rounds:
            for turn in timing.turns.values():
                assert turn(1, 0) > 0
            calls.append([c.name for c in asked])
            return {c.name: [ratios.get(c.name, 1.0) * 1e-4] * 5 for c in asked}

        return measure

    monkeypatch.setattr(auto_tuning, "timed", timed)
    return calls


def _enable_all(model: onnx.ModelProto | str, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 4
    source = model if isinstance(model, str) else model.SerializeToString()
    got: list[np.ndarray] = ort.InferenceSession(source, options).run(None, dict(feeds))
    return got


# -- the decision (no session) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("original", "chosen"),
    [
        (0.75, ORIGINAL),  # issue #42's GRU step: the onnxruntime plan at 1.34x of the original
        (0.99, ORIGINAL),  # the floor needs no margin: a custom-op call per node costs ~1-13%
        (1.01, BASELINE),
        (1.40, BASELINE),
    ],
)
def test_the_original_wins_where_it_is_faster(original: float, chosen: str) -> None:
    candidates = choices([])
    rounds = {BASELINE: [1e-3] * 7, ORIGINAL: [original * 1e-3] * 7}
    decision = decide(candidates, lambda asked: {c.name: rounds[c.name] for c in asked})
    assert decision.choice.name == chosen
    assert decision.settled and decision.runner_up == ({BASELINE, ORIGINAL} - {chosen}).pop()


def test_a_partition_plan_still_needs_the_margin_over_the_original() -> None:
    """oneDNN's plans change results: they must beat the onnxruntime plan by the margin, and
    then the original too."""
    conv = tuner.Partition("conv", ("Dequantize", "Convolution"), "onednn", "r")
    candidates = [c for c in choices([conv]) if c.name in (BASELINE, ORIGINAL, "onednn")]

    def measure(ratios: dict[str, float]) -> tuner.Measure:
        return lambda asked: {c.name: [ratios[c.name] * 1e-3] * 5 for c in asked}

    near = {BASELINE: 1.0, ORIGINAL: 1.0, "onednn": (MARGIN + 1.0) / 2}
    assert decide(candidates, measure(near)).choice.name == BASELINE
    ahead = {BASELINE: 1.0, ORIGINAL: 0.8, "onednn": 0.7}
    assert decide(candidates, measure(ahead)).choice.name == "onednn"
    behind = {BASELINE: 1.0, ORIGINAL: 0.6, "onednn": 0.7}
    assert decide(candidates, measure(behind)).choice.name == ORIGINAL


# -- sessions: the original's form carried out -------------------------------------------------


@requires_onednn
@pytest.mark.parametrize("name", list(MODELS))
def test_where_the_original_is_fastest_the_session_computes_what_it_computes(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = MODELS[name]()
    calls = _timings(monkeypatch, {ORIGINAL: 0.6})
    feeds = make_inputs(original, seed=1)
    session = quantgraph.InferenceSession(
        quantgraph.convert(original).proto, "native", fusion="auto", tune_inputs=feeds
    )
    plan = session.fusion_plan
    decision = plan.tuning
    assert [c.name for c in decision.candidates].count(ORIGINAL) == 1
    assert len(calls) == 1 and decision.choice.name == ORIGINAL
    assert decision.why == "plan 'original' measured fastest at 0.60x of plan 'onnxruntime'"
    # the plan names it: each unit is an original node given back, run by onnxruntime
    assert plan.units and all(u.engine == "onnxruntime" for u in plan.units)
    assert all(u.reason.startswith(decision.why) for u in plan.units)
    assert all(original_form.WHAT in u.reason for u in plan.units)
    assert not plan.alone  # every spec op lowered: no custom op left to run
    for got, want in zip(session.run(None, feeds), _enable_all(original, feeds), strict=True):
        np.testing.assert_array_equal(got, want)


@requires_onednn
def test_the_original_form_is_kept_where_it_is_slower(monkeypatch: pytest.MonkeyPatch) -> None:
    original = producers.gru_step()
    _timings(monkeypatch, {ORIGINAL: 1.2})
    feeds = make_inputs(original, seed=1)
    session = quantgraph.InferenceSession(
        quantgraph.convert(original).proto, "native", fusion="auto", tune_inputs=feeds
    )
    decision = session.fusion_plan.tuning
    assert decision.choice.name != ORIGINAL and decision.ratios[ORIGINAL] == pytest.approx(1.2)


def test_the_original_form_lowers_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lowering writes nothing (no file in the folder or the temporary one) and names each
    original node it gave back."""
    converted = quantgraph.convert(producers.gru_step()).model
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    plan = original_form.plan(converted, "why")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"] and not list(scratch.iterdir())
    kernels = sorted(u.kernel for u in plan.units)
    assert kernels == ["DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger"], plan.to_dict()
    assert not plan.alone
    ops = [n.op_type for n in converted.graph]
    assert "DynamicQuantizeLinear" in ops and "MatMulInteger" in ops
    assert not [n for n in converted.graph if n.domain == quantgraph.DOMAIN]


# -- weights in external data: by reference, never copied --------------------------------------


def _external(model: onnx.ModelProto, folder: Path) -> Path:
    folder.mkdir()
    path = folder / "original.onnx"
    onnx.save(model, path, save_as_external_data=True, location="original.data")
    return path


@requires_onednn
def test_weights_in_external_data_are_handed_over_by_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A converted model in external data, its original form chosen: the session runs it from
    the data file where it lies (the candidate's serialized graph holds no weight, each
    external weight is a read-only view of the file) and computes what the original does."""
    original = _external(producers.gru_step(), tmp_path / "original")
    converted = tmp_path / "converted"
    converted.mkdir()
    model = converted / "model_qg.onnx"
    quantgraph.convert(str(original)).save(model, external_data="model_qg.data")
    data = converted / "model_qg.data"
    weights = data.stat().st_size
    _timings(monkeypatch, {ORIGINAL: 0.6})
    feeds = make_inputs(str(original), seed=2)
    session = quantgraph.InferenceSession(str(model), "native", fusion="auto", tune_inputs=feeds)
    decision = session.fusion_plan.tuning
    assert decision.choice.name == ORIGINAL
    # gru_step's plans make one model: no candidate session is made (timings injected)
    assert decision.isolation == NOTHING_TO_TIME
    for got, want in zip(session.run(None, feeds), _enable_all(str(original), feeds), strict=True):
        np.testing.assert_array_equal(got, want)
    # the candidate's source, as the tuning built it
    from quantgraph.ir.model_files import load_model

    loaded = load_model(model)
    tensors = {name: v.const_value for name, v in loaded.graph.initializers.items()}
    assert any(isinstance(t, ir.ExternalTensor) for t in tensors.values())
    lowered = loaded.clone()
    original_form.plan(lowered, "why")
    options = ort.SessionOptions()
    before = os.listdir(converted)
    source = weights_by_reference.source(lowered, options)
    assert len(source.model) < weights / 2 and os.listdir(converted) == before
    views = [a for a in source.held if isinstance(a, np.ndarray) and not a.flags.writeable]
    assert views and all(not v.flags.owndata for v in views)
    assert sum(v.nbytes for v in views) >= weights // 2  # the large ones, from the file
    # the session's own model is as it was: lowering and handing over changed copies only
    assert {n: v.const_value for n, v in loaded.graph.initializers.items()} == tensors


# -- 4-bit weights: why oneDNN forms nothing ---------------------------------------------------


@requires_onednn
def test_int4_matmul_units_say_why_onednn_forms_nothing() -> None:
    model = producers.weight_only(64, 32, False)  # QDQ form: blocked uint4 DequantizeLinear
    session = quantgraph.InferenceSession(
        quantgraph.convert(model).proto, "native", fusion="auto", tuning="cache"
    )
    units = [u for u in session.fusion_plan.units if u.kernel == "com.microsoft.MatMulNBits"]
    assert units, session.fusion_plan.to_dict()
    for unit in units:
        assert unit.reason.startswith("oneDNN formed no partition: "), unit.reason
        if onednn.version_tuple() < (3, 7, 0):
            assert "needs oneDNN v3.7+" in unit.reason and "no s4/u4" in unit.reason
        else:
            assert "gated-MLP pattern" in unit.reason
