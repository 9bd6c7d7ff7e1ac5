"""Fusion "auto"'s cache keeps its word (issue #42 items 4 and 10, "what must hold" 2): a
decision answers only at the shapes it was measured at, it records its spread, one whose spread
overlaps the runner-up's is measured again (bounded) rather than trusted, and entries expire.
The decision logic with injected per-round timings (exact); sessions with the measurement
injected (each candidate's session still runs once)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import quantgraph
from quantgraph.cli import main
from quantgraph.fusion.auto import auto_tuning, tuner, tuning_cache
from quantgraph.fusion.auto.tuner import BASELINE, REMEASURE, Partition, choices, decide
from quantgraph.fusion.plan import ORIGINAL
from quantgraph.runtime import tuning_workers
from quantgraph.schemas_json import schema
from quantgraph.validation import make_inputs
from tests.builders import requires_onednn

ROOT = Path(__file__).resolve().parent.parent
TRANSFORMER = ROOT / "models" / "transformer_u8.onnx"  # input [batch, 8, 32]
CNN = ROOT / "models" / "cnn_u8.onnx"  # input [1, 3, 16, 16]: shapes the model fixes
CONV = Partition("conv", ("Dequantize", "Dequantize", "Convolution", "Quantize"), "onednn", "r")


# -- the spread and the re-measurements (no session) -------------------------------------------


def _rounds(**per_candidate: Sequence[float]) -> tuner.Rounds:
    return {
        name.replace("_", " "): [t * 1e-3 for t in times] for name, times in per_candidate.items()
    }


def test_a_decision_records_its_spread() -> None:
    candidates = [c for c in choices([CONV]) if c.name in (BASELINE, "onednn")]
    rounds = {BASELINE: [1e-3, 2e-3, 1e-3, 2e-3, 1e-3], "onednn": [5e-4, 1e-3, 5e-4, 1e-3, 5e-4]}
    decision = decide(candidates, lambda asked: {c.name: rounds[c.name] for c in asked})
    assert decision.choice.name == "onednn" and decision.settled
    assert decision.times_ms == pytest.approx({BASELINE: 1.0, "onednn": 0.5})
    assert decision.spread_ms[BASELINE] == pytest.approx([1.0, 2.0])
    assert decision.spread_ms["onednn"] == pytest.approx([0.5, 1.0])
    # paired round by round, the ratio has no spread although the times do
    assert decision.ratio_spread["onednn"] == pytest.approx([0.5, 0.5])
    assert decision.measurements == 1 and decision.rounds == 5 and decision.runner_up == BASELINE
    listed: Any = decision.to_dict()["candidates"]
    candidate = {c["name"]: c for c in listed}["onednn"]
    assert candidate["quartiles_ms"] == pytest.approx([0.5, 1.0])
    assert candidate["ratio_quartiles"] == pytest.approx([0.5, 0.5])


def test_an_overlapping_decision_is_measured_again_until_it_settles() -> None:
    """First measurement: 'onednn' ahead by its median but its ratio quartiles reach the
    baseline's: measured again, only it, the runner-up and the baseline, rounds pooled."""
    candidates = [c for c in choices([CONV]) if c.name in (BASELINE, ORIGINAL, "onednn")]
    asked: list[list[str]] = []
    answers = [
        {BASELINE: [1.0] * 4, ORIGINAL: [1.5] * 4, "onednn": [0.5, 0.6, 1.1, 1.2]},
        {BASELINE: [1.0] * 8, "onednn": [0.5] * 8},
    ]

    def measure(wanted: Sequence[tuner.Choice]) -> tuner.Rounds:
        asked.append([c.name for c in wanted])
        answer = answers[len(asked) - 1]
        return {c.name: [t * 1e-3 for t in answer[c.name]] for c in wanted}

    decision = decide(candidates, measure)
    assert asked == [[BASELINE, ORIGINAL, "onednn"], [BASELINE, "onednn"]]
    assert decision.choice.name == "onednn" and decision.settled
    assert decision.measurements == 2 and decision.rounds == 12
    assert decision.runner_up == BASELINE
    assert decision.ratios[ORIGINAL] == pytest.approx(1.5)  # from the first measurement only


def test_a_near_tie_is_measured_a_bounded_number_of_times_and_says_so() -> None:
    candidates = choices([])  # the baseline and the original's own form

    def measure(wanted: Sequence[tuner.Choice]) -> tuner.Rounds:
        noisy = [0.9, 1.0, 1.1, 1.0, 0.95]
        return {
            c.name: [t * 1e-3 for t in ([1.0] * 5 if c.name == BASELINE else noisy)] for c in wanted
        }

    decision = decide(candidates, measure)
    assert decision.measurements == 1 + REMEASURE and decision.settled is False
    assert decision.choice.name == BASELINE and decision.runner_up == ORIGINAL
    assert decision.why.endswith(f"within noise of plan '{ORIGINAL}' (measured 3 times))")
    assert decision.to_dict()["settled"] is False


def test_plans_making_one_model_are_no_rivals() -> None:
    """A twin (timed as the chosen plan: the same rounds) is never the runner-up."""
    candidates = choices([], lone=True)
    same = [1e-3, 1.2e-3, 0.9e-3]
    rounds = {BASELINE: same, "onnxruntime, lone Q/DQ too": same, ORIGINAL: [2e-3] * 3}
    decision = decide(candidates, lambda asked: {c.name: rounds[c.name] for c in asked})
    assert decision.choice.name == BASELINE and decision.runner_up == ORIGINAL
    assert decision.settled and decision.measurements == 1


def test_a_cache_entry_keeps_the_spread_and_the_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(tmp_path))
    candidates = [c for c in choices([CONV]) if c.name in (BASELINE, "onednn")]
    rounds = {BASELINE: [1e-3, 2e-3, 1e-3], "onednn": [6e-4, 1e-3, 5e-4]}
    decision = decide(candidates, lambda asked: {c.name: rounds[c.name] for c in asked})
    decision.shapes = {"x": [2, 4]}
    decision.measured_at = 1_700_000_000.0
    key = {"model_sha256": "z"}
    assert tuning_cache.store(key, decision) is not None
    assert tuning_cache.load(key, {"x": [3, 4]}) is None  # other shapes: no answer
    loaded = tuning_cache.load(key, {"x": [2, 4]})
    assert loaded is not None and loaded.source == "cache"
    for field in (
        "spread_ms",
        "ratio_spread",
        "measurements",
        "runner_up",
        "settled",
        "measured_at",
    ):
        assert getattr(loaded, field) == getattr(decision, field), field
    assert loaded.to_dict()["measured_at"] == "2023-11-14T22:13:20Z"


# -- sessions: shapes, age -----------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(tuning_workers.ENVIRONMENT, "none")  # in-process: quicker to build
    monkeypatch.delenv(auto_tuning.MAX_AGE_ENVIRONMENT, raising=False)
    return tmp_path / "cache" / "tuning"


def _measured(monkeypatch: pytest.MonkeyPatch, ratios: Mapping[str, float]) -> list[list[str]]:
    """The measurement replaced (each candidate's session still runs once); the names asked."""
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


@pytest.fixture(scope="module")
def transformer_qg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "transformer_qg.onnx"
    quantgraph.convert(TRANSFORMER).save(path)
    return path


def _batch(size: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(size)
    return {"input": rng.standard_normal((size, 8, 32)).astype(np.float32)}


@requires_onednn
def test_a_decision_tuned_at_other_shapes_is_no_answer(
    transformer_qg: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #42 item 4: `tune` at one batch, then sessions at another: they measure (or, with
    tuning "cache", run the baseline and say why), never take the other shapes' decision."""
    calls = _measured(monkeypatch, {ORIGINAL: 0.8})
    runner = CliRunner()
    tuned = runner.invoke(main, ["tune", str(transformer_qg), "--dim", "batch=4", "--json"])
    assert tuned.exit_code == 0, tuned.output
    assert json.loads(tuned.stdout)["tuning"]["shapes"] == {"input": [4, 8, 32]}
    assert len(calls) == 1
    ran = runner.invoke(
        main, ["run", str(transformer_qg), "--fusion", "auto", "--dim", "batch=1", "--json"]
    )
    assert ran.exit_code == 0, ran.output
    decided = json.loads(ran.stdout)["fusion_plan"]["tuning"]
    assert decided["source"] == "measured" and decided["shapes"] == {"input": [1, 8, 32]}
    assert len(calls) == 2
    # at the tuned shapes: the cache answers, at the first run (the model leaves batch open)
    session = quantgraph.InferenceSession(str(transformer_qg), "native", fusion="auto")
    assert session.fusion_plan.tuning.source == "pending"
    session.run(None, _batch(4))
    assert session.fusion_plan.tuning.source == "cache" and len(calls) == 2
    # tuning "cache" at shapes never measured: the baseline, and why
    other = quantgraph.InferenceSession(
        str(transformer_qg), "native", fusion="auto", tuning="cache"
    )
    waiting = other.fusion_plan.tuning.why
    assert any(waiting in u.reason for u in other.fusion_plan.units)
    other.run(None, _batch(2))
    decision = other.fusion_plan.tuning
    assert decision.source == "not measured" and decision.choice.name == BASELINE
    # the plan it ran already: kept (not planned again), its reasons quoting the decision
    assert not any(waiting in u.reason for u in other.fusion_plan.units)
    assert any(decision.why in u.reason for u in other.fusion_plan.units)
    assert decision.why == (
        "not measured (tuning 'cache': no decision cached at these shapes): onnxruntime's plan, "
        "the baseline"
    )
    assert len(calls) == 2


@requires_onednn
def test_a_model_that_fixes_its_shapes_finds_its_decision_at_creation(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _measured(monkeypatch, {ORIGINAL: 0.8})
    converted = quantgraph.convert(CNN).proto
    feeds = make_inputs(CNN)
    quantgraph.InferenceSession(converted, "native", fusion="auto", tune_inputs=feeds)
    assert len(calls) == 1
    later = quantgraph.InferenceSession(converted, "native", fusion="auto")
    assert later.fusion_plan.tuning.source == "cache"  # not "pending": the shapes are known
    assert later.fusion_plan.tuning.choice.name == ORIGINAL


@requires_onednn
def test_an_old_decision_expires(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _measured(monkeypatch, {})
    converted = quantgraph.convert(CNN).proto
    feeds = make_inputs(CNN)
    first = quantgraph.InferenceSession(converted, "native", fusion="auto", tune_inputs=feeds)
    path = Path(first.fusion_plan.tuning.cache_file)
    stored = json.loads(path.read_text())
    (entry,) = stored["decisions"].values()
    entry["measured_at"] = time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 40 * 86400)
    )
    path.write_text(json.dumps(stored))

    def session(mode: str = "measure") -> quantgraph.InferenceSession:
        return quantgraph.InferenceSession(converted, "native", fusion="auto", tuning=mode)

    monkeypatch.setenv(auto_tuning.MAX_AGE_ENVIRONMENT, "50")  # 40 days old: within 50
    young = session().fusion_plan.tuning
    assert young.source == "cache" and young.age_seconds() == pytest.approx(40 * 86400, abs=600)
    assert len(calls) == 1
    monkeypatch.delenv(auto_tuning.MAX_AGE_ENVIRONMENT)  # 30 days by default: expired
    kept_back = session("cache").fusion_plan.tuning
    assert kept_back.source == "not measured" and len(calls) == 1
    assert (
        "the cached decision is 40.0 days old, past QUANTGRAPH_TUNING_MAX_AGE=30 days"
        in kept_back.why
    )
    measuring = session()  # expired: its first run measures
    assert measuring.fusion_plan.tuning.source == "pending"
    measuring.run(None, feeds)
    assert measuring.fusion_plan.tuning.source == "measured" and len(calls) == 2
    assert session().fusion_plan.tuning.source == "cache"  # the new one stands
    monkeypatch.setenv(auto_tuning.MAX_AGE_ENVIRONMENT, "soon")
    with pytest.raises(ValueError, match="QUANTGRAPH_TUNING_MAX_AGE must be a number of days >= 0"):
        session()


@requires_onednn
def test_tune_json_shows_the_spread_and_the_age(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _measured(monkeypatch, {ORIGINAL: 0.9})
    model = tmp_path / "cnn_qg.onnx"
    quantgraph.convert(CNN).save(model)
    runner = CliRunner()
    done = runner.invoke(main, ["tune", str(model), "--json"])
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, schema("tune"))
    tuning = payload["tuning"]
    assert tuning["measurements"] == 1 and tuning["settled"] is True
    assert tuning["age_seconds"] < 60 and tuning["measured_at"].endswith("Z")
    original = {c["name"]: c for c in tuning["candidates"]}[ORIGINAL]
    assert original["quartiles_ms"] == pytest.approx([0.09, 0.09])
    assert original["ratio_quartiles"] == pytest.approx([0.9, 0.9])
    text = runner.invoke(main, ["run", str(model), "--fusion", "auto", "--verbose"])
    assert text.exit_code == 0, text.output
    assert re.search(r"^  cached \d+ s ago$", text.stdout, re.M), text.stdout
    assert "0.090 ms a run (0.090-0.090), 0.90x of plan 'onnxruntime' (0.90-0.90)" in text.stdout
    again = runner.invoke(main, ["tune", str(model), "--again", "--json"])  # the manual way
    assert json.loads(again.stdout)["tuning"]["source"] == "measured"


def test_onnx_of_the_models_used() -> None:
    """The test models are what the tests say: a batch left open, shapes fixed."""
    transformer = onnx.load(TRANSFORMER).graph.input[0].type.tensor_type.shape.dim
    assert transformer[0].dim_param == "batch" and transformer[1].dim_value == 8
    cnn = onnx.load(CNN).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in cnn] == [1, 3, 16, 16]


def test_a_decoders_cache_inputs_are_one_item_per_name_pattern() -> None:
    """Forty-four past_key_values inputs printed as one item, ordinary inputs one each."""
    from quantgraph.cli.render_text import shapes_text

    shapes: dict[str, tuple[int, ...]] = {"input_ids": (1, 1), "attention_mask": (1, 129)}
    for layer in range(22):
        for part in ("key", "value"):
            shapes[f"past_key_values.{layer}.{part}"] = (1, 4, 128, 64)
    assert shapes_text(shapes) == (
        "input_ids[1x1], attention_mask[1x129], past_key_values.*.{key,value}[1x4x128x64] "
        "(44 inputs)"
    )
    assert shapes_text({"x1": (2,), "x2": (2,), "y": (3,)}) == "x1[2], x2[2], y[3]"
