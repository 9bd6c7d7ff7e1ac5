"""fusion="auto" decides by measuring (issue #33): the decision logic with injected timings
(exact), the timing loop with an injected clock, the cache, the modes, and one real measurement
on whatever CPU runs the suite."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from click.testing import CliRunner

import quantgraph
from quantgraph.cli import main
from quantgraph.fusion.auto import tuner, tuning_cache
from quantgraph.fusion.auto.tuner import BASELINE, MARGIN, Partition, choices, decide
from quantgraph.fusion.ort import ort_engine
from quantgraph.fusion.plan import ONNXRUNTIME_LONE, ORIGINAL
from quantgraph.schemas_json import schema
from quantgraph.validation import make_inputs
from tests.builders import requires_onednn

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "models" / "cnn_u8.onnx"

CONV = Partition("conv", ("Dequantize", "Dequantize", "Convolution", "Quantize"), "onednn", "r")
MATMUL = Partition("fc", ("Dequantize", "Dequantize", "MatMul"), "onnxruntime", "r")
POOL = Partition("pool", ("Dequantize", "MaxPool", "Quantize"), "onnxruntime", "r")


# -- the candidate plans and the decision (no session) -----------------------------------------


def test_candidates_baseline_first_none_twice() -> None:
    found = choices([CONV, MATMUL, POOL])
    names = [c.name for c in found]
    assert names[0] == BASELINE and len(set(names)) == len(names)
    assert len({(c.engines, c.rest) for c in found}) == len(found)
    by_name = {c.name: c for c in found}
    assert by_name[BASELINE].to_onednn == 0 and by_name["onednn"].to_onednn == 3
    assert by_name["onednn for MatMul only"].engine_for("fc") == "onednn"
    assert by_name["onednn for MatMul only"].engine_for("conv") == "onnxruntime"
    rules = (("conv", "onednn"), ("fc", "onnxruntime"), ("pool", "onnxruntime"))
    assert by_name["rules"].engines == rules
    assert "onednn for Convolution only" not in by_name  # the same plan as the rules'
    # fusion "onednn"'s own plan: the same partitions, every other spec op alone
    alone = by_name["onednn partitions only"]
    assert alone.engines == by_name["onednn"].engines and alone.rest == "none"
    assert by_name["onednn"].rest == BASELINE
    # One kind only: no per-kind mixes; a rule table that agrees with a plan adds nothing.
    assert [c.name for c in choices([CONV])] == [
        BASELINE,
        ORIGINAL,
        "onednn",
        "onednn partitions only",
    ]
    # the original's own form, always: every spec op lowered back, no partition
    assert by_name[ORIGINAL].rest == ORIGINAL and by_name[ORIGINAL].to_onednn == 0


def _fixed(ratios: Mapping[str, float], rounds: int = 5) -> tuner.Measure:
    """Every round the same: each candidate takes ``ratios[name]`` times 2 ms (no spread)."""

    def measure(candidates: Sequence[tuner.Choice]) -> tuner.Rounds:
        return {c.name: [ratios[c.name] * 2e-3] * rounds for c in candidates if c.name in ratios}

    return measure


@pytest.mark.parametrize(
    ("ratios", "chosen"),
    [
        ({BASELINE: 1.0, "onednn": 0.6, "rules": 0.7}, "onednn"),
        ({BASELINE: 1.0, "onednn": 0.99, "rules": 1.2}, BASELINE),  # within the margin: noise
        ({BASELINE: 1.0, "onednn": 1.5, "rules": MARGIN - 0.01}, "rules"),
        ({BASELINE: 1.0, "onednn": 5.4, "rules": 4.5}, BASELINE),  # never slower
    ],
)
def test_the_fastest_plan_wins_by_a_margin(ratios: dict[str, float], chosen: str) -> None:
    candidates = choices([CONV, MATMUL])
    candidates = [c for c in candidates if c.name in ratios]
    decision = decide(candidates, _fixed(ratios))
    assert decision.choice.name == chosen and decision.source == "measured"
    assert decision.ratios == pytest.approx(ratios) and decision.rounds == 5
    assert decision.why.startswith(f"plan '{chosen}'")
    assert decision.settled and decision.measurements == 1  # no spread: nothing overlaps


def test_no_partition_still_the_original_to_measure() -> None:
    """Without partitions the original's own form is the one other plan: measured, never
    "no partition" (that is left for a single candidate)."""
    assert [c.name for c in choices([])] == [BASELINE, ORIGINAL]
    only = choices([])[0]

    def never(candidates: object) -> tuner.Rounds:
        raise AssertionError("measured")

    decision = decide([only], never)
    assert decision.choice.name == BASELINE and decision.source == "no partition"


def test_time_runs_with_an_injected_clock() -> None:
    """Each run advances a fake clock by its own cost: medians and ratios come out exact, the
    rounds stop at the budget (but never below the minimum)."""
    now = [0.0]
    costs = {BASELINE: 0.002, "onednn": 0.001, "rules": 0.003}

    def advance(cost: float) -> Callable[[], None]:
        def run() -> None:
            now[0] += cost

        return run

    runs = {name: advance(cost) for name, cost in costs.items()}
    per_round = tuner.time_runs(runs, budget=0.5, clock=lambda: now[0])
    assert list(per_round) == list(costs)
    for name, cost in costs.items():
        assert per_round[name] == pytest.approx([cost] * len(per_round[name]))
    rounds = len(per_round[BASELINE])
    assert tuner.MIN_ROUNDS <= rounds <= tuner.MAX_ROUNDS
    assert all(len(v) == rounds for v in per_round.values())
    # 20 ms turns of 6 ms rounds' worth of calls: the budget is spent after a few rounds
    assert now[0] < 0.5 + 3 * 0.06 * 10
    tiny = tuner.time_runs(runs, budget=1e-9, clock=lambda: now[0])
    assert len(tiny[BASELINE]) == tuner.MIN_ROUNDS
    decision = tuner.judge(choices([CONV, MATMUL]), [per_round])
    assert decision.times_ms == pytest.approx({n: c * 1e3 for n, c in costs.items()})
    assert decision.ratios == pytest.approx({BASELINE: 1.0, "onednn": 0.5, "rules": 1.5})


# -- sessions: the decision carried out, cached, and the modes ---------------------------------


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "tuning"


@pytest.fixture(scope="module")
def rewritten() -> onnx.ModelProto:
    return quantgraph.convert(CNN).proto


def _fake_timing(monkeypatch: pytest.MonkeyPatch, ratios: Mapping[str, float]) -> list[list[str]]:
    """time_turns replaced: each candidate's session (in its worker) runs once (it must work),
    and the ratios are ``ratios`` (1.0 for any other candidate)."""
    calls: list[list[str]] = []

    def fake(
        turns: Mapping[str, tuner.Turn],
        budget: float = 0.0,
        clock: object = None,
        dropped: object = None,
    ) -> tuner.Rounds:
        calls.append(list(turns))
        for turn in turns.values():
            assert turn(1, 0) > 0
        return {name: [ratios.get(name, 1.0) * 1e-4] * 3 for name in turns}

    monkeypatch.setattr(tuner, "time_turns", fake)
    return calls


@requires_onednn
def test_the_session_runs_the_plan_that_measured_fastest(
    rewritten: onnx.ModelProto, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_timing(monkeypatch, {"onednn": 0.5})
    feeds = make_inputs(CNN)
    session = quantgraph.InferenceSession(rewritten, "native", fusion="auto", tune_inputs=feeds)
    decision = session.fusion_plan.tuning
    assert decision.choice.name == "onednn" and decision.source == "measured"
    assert len(calls) == 1 and calls[0][0] == BASELINE
    units = session.fusion_plan.units
    assert any(u.engine == "onednn" for u in units)
    assert all(
        "plan 'onednn' measured fastest at 0.50x" in u.reason for u in units if u.engine == "onednn"
    )
    assert decision.cache_file is not None and Path(decision.cache_file).parent == cache
    stored = json.loads(Path(decision.cache_file).read_text())
    assert stored["key"]["cpu_flags"] and stored["key"]["model_sha256"]
    (entry,) = stored["decisions"].values()
    assert entry["chosen"] == "onednn" and entry["shapes"] == {"input": [1, 3, 16, 16]}
    # The same model, shapes, CPU, threads and libraries: from the cache, nothing measured.
    again = quantgraph.InferenceSession(rewritten, "native", fusion="auto", tune_inputs=feeds)
    assert again.fusion_plan.tuning.source == "cache" and len(calls) == 1
    np.testing.assert_array_equal(again.run(None, feeds)[0], session.run(None, feeds)[0])


@requires_onednn
def test_modes_cache_force_and_the_first_run(
    rewritten: onnx.ModelProto, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_timing(monkeypatch, {"rules": 0.8})
    feeds = make_inputs(CNN)
    cached_only = quantgraph.InferenceSession(
        rewritten, "native", fusion="auto", tune_inputs=feeds, tuning="cache"
    )
    plan = cached_only.fusion_plan
    assert plan.tuning.source == "not measured" and not calls
    assert all(u.engine == "onnxruntime" for u in plan.units)  # a cache miss: the baseline
    # No inputs yet: the first run decides, on its inputs, and later runs use that plan.
    lazy = quantgraph.InferenceSession(rewritten, "native", fusion="auto")
    assert lazy.fusion_plan.tuning.source == "pending" and not calls
    held = lazy.run  # as a caller that took the method before the first run (bench does)
    first = held(None, feeds)
    assert len(calls) == 1 and lazy.fusion_plan.tuning.source == "measured"
    decided = lazy.fusion_plan
    np.testing.assert_array_equal(held(None, feeds)[0], first[0])
    np.testing.assert_array_equal(lazy.run(None, feeds)[0], first[0])
    assert len(calls) == 1 and lazy.fusion_plan is decided  # decided once, not at every call
    forced = quantgraph.InferenceSession(
        rewritten, "native", fusion="auto", tune_inputs=feeds, tuning="force"
    )
    assert forced.fusion_plan.tuning.source == "measured" and len(calls) == 2
    with pytest.raises(ValueError, match="tuning must be one of measure, cache, force"):
        quantgraph.InferenceSession(rewritten, "native", fusion="auto", tuning="sometimes")


def test_an_unwritable_cache_costs_a_measurement_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(blocked))
    candidates = choices([CONV])
    decision = decide(candidates, _fixed({BASELINE: 1.0, "onednn": 0.5}))
    key = {"model_sha256": "x"}
    assert tuning_cache.store(key, decision) is None
    assert tuning_cache.load(key, {}) is None


def test_a_damaged_cache_file_is_ignored(cache: Path) -> None:
    candidates = choices([CONV])
    decision = decide(candidates, _fixed({BASELINE: 1.0, "onednn": 0.5}))
    decision.shapes = {"x": [1, 4]}
    key = {"model_sha256": "y"}
    path = tuning_cache.store(key, decision)
    assert path is not None
    loaded = tuning_cache.load(key, {"x": [1, 4]})
    assert loaded is not None and loaded.choice == decision.choice
    assert tuning_cache.load(key, {"x": [2, 4]}) is None
    path.write_text("{ half")
    assert tuning_cache.load(key, {"x": [1, 4]}) is None
    assert tuning_cache.store(key, decision) == path  # and rewritten


# -- the real measurement, on the CPU at hand --------------------------------------------------


@requires_onednn
def test_auto_measures_on_this_cpu_and_is_never_slower(
    rewritten: onnx.ModelProto, cache: Path
) -> None:
    feeds = make_inputs(CNN)
    session = quantgraph.InferenceSession(
        rewritten, "native", fusion="auto", tune_inputs=feeds, tuning_budget=1.0
    )
    decision = session.fusion_plan.tuning
    assert decision.source == "measured" and decision.rounds >= tuner.MIN_ROUNDS
    assert set(decision.times_ms) == {c.name for c in decision.candidates}
    assert all(t > 0 for t in decision.times_ms.values())
    assert decision.ratios[BASELINE] == 1.0
    assert decision.ratios[decision.choice.name] <= 1.0  # the baseline or one that beat it
    assert session.run(None, feeds)[0].shape == (1, 10)


@requires_onednn
def test_tune_and_inspect_show_the_decision(tmp_path: Path, cache: Path) -> None:
    model = tmp_path / "cnn_qg.onnx"
    quantgraph.convert(CNN).save(model)
    runner = CliRunner()
    done = runner.invoke(main, ["tune", str(model), "--budget", "0.5", "--json"])
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    import jsonschema

    jsonschema.validate(payload, schema("tune"))
    assert payload["tuning"]["source"] == "measured"
    assert Path(payload["tuning"]["cache_file"]).parent == cache
    text = runner.invoke(main, ["inspect", str(CNN), "--fusion", "auto"])
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert any(line.startswith("auto: plan '") for line in lines), lines
    assert any("ms a run" in line for line in lines)
    refused = runner.invoke(main, ["tune", str(CNN)])
    assert refused.exit_code == 2 and "holds no quantgraph spec ops" in refused.stderr


# -- the lone-Q/DQ candidate: onnxruntime's plan, its unfused Q/DQ run by onnxruntime too ---------


def test_the_lone_candidate_only_in_the_onnx_arithmetic() -> None:
    found = choices([CONV], lone=True)
    assert [c.name for c in found][:2] == [BASELINE, ONNXRUNTIME_LONE]
    assert found[1].engines == found[0].engines and found[1].rest == ONNXRUNTIME_LONE
    # Without partitions: it and the original's own form, measured.
    assert [c.name for c in choices([], lone=True)] == [BASELINE, ONNXRUNTIME_LONE, ORIGINAL]
    assert ONNXRUNTIME_LONE not in [c.name for c in choices([CONV])]


@pytest.mark.parametrize("name", ["transformer_u8", "if_branch_u8"])
def test_lone_q_dq_run_by_onnxruntime_are_exact(name: str) -> None:
    """Each Q/DQ onnxruntime keeps as it is becomes a unit of its own (its own kernel) and the
    model stays identical to the original at ORT_ENABLE_ALL."""
    path = ROOT / "models" / f"{name}.onnx"
    converted = quantgraph.convert(path).proto
    kept = ort_engine.plan(ir.from_proto(converted), 99)
    lone_model = ir.from_proto(converted)
    lone = ort_engine.plan(lone_model, 99, lone=True)
    keeps = [a.node for a in kept.alone if "keeps this" in a.reason]
    assert keeps and not [a for a in lone.alone if "keeps this" in a.reason]
    own = [u for u in lone.units if u.kernel.startswith(ort_engine.LONE_KERNEL)]
    assert sorted(n for u in own for n in u.nodes) == sorted(keeps)
    assert all(u.compute == "" for u in own)
    feeds = make_inputs(path, seed=3)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 4
    want = ort.InferenceSession(str(path), options).run(None, feeds)
    got = quantgraph.InferenceSession(ir.to_proto(lone_model), "native").run(None, feeds)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@requires_onednn
def test_plans_making_the_same_model_are_timed_once(
    rewritten: onnx.ModelProto, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_timing(monkeypatch, {})
    feeds = make_inputs(CNN)
    session = quantgraph.InferenceSession(rewritten, "native", fusion="auto", tune_inputs=feeds)
    decision = session.fusion_plan.tuning
    names = [c.name for c in decision.candidates]
    assert ONNXRUNTIME_LONE in names  # the native backend computes the onnx arithmetic
    (timed,) = calls
    assert len(timed) == len(set(timed))
    # every candidate has a time: a twin gets the one of the plan it equals
    assert set(decision.ratios) == set(names)
    onednn_arithmetic = quantgraph.InferenceSession(
        rewritten, "native", arithmetic="onednn", fusion="auto", tune_inputs=feeds
    )
    assert ONNXRUNTIME_LONE not in [c.name for c in onednn_arithmetic.fusion_plan.tuning.candidates]
