"""fusion "auto"'s candidates timed one at a time where their sessions would not fit side by
side (issue #41: tune and run --fusion auto ran out of memory under `ulimit -v` of four times
the weights): one session alive at a time, blocks in the order given and back, rounds paired
block by block; the decision says so and why."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

import quantgraph
from quantgraph.fusion.auto import tuner
from quantgraph.fusion.auto.tuner import BASELINE
from quantgraph.runtime import candidate_memory, tuning_workers
from quantgraph.runtime import session as session_module
from quantgraph.runtime.candidates import new_session
from quantgraph.validation import make_inputs

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "models" / "cnn_u8.onnx"


class _Session:
    """Stands for a candidate's session: alive while anything refers to it."""


def test_blocks_in_order_and_back_one_session_alive() -> None:
    costs = {BASELINE: 0.002, "b": 0.001, "c": 0.004}
    opened: list[str] = []
    alive: list[weakref.ref[_Session]] = []

    def opener(name: str) -> tuner.Opener:
        @contextlib.contextmanager
        def opened_one() -> Iterator[tuner.Turn]:
            assert all(ref() is None for ref in alive), "a session outlived its block"
            session = _Session()
            alive.append(weakref.ref(session))
            opened.append(name)

            def turn(count: int, warm: int) -> float:
                assert session is not None
                return costs[name] * count

            yield turn

        return opened_one

    rounds = tuner.time_one_at_a_time({n: opener(n) for n in costs}, budget=1.0)
    assert opened == [BASELINE, "b", "c", "b", BASELINE]  # the last held open for two blocks
    assert list(rounds) == list(costs)
    count = len(rounds[BASELINE])
    assert all(len(times) == count for times in rounds.values())
    assert tuner.MIN_ROUNDS <= count <= tuner.MAX_ROUNDS and count % 2 == 0
    for name, cost in costs.items():
        assert rounds[name] == pytest.approx([cost] * count)
    decision = tuner.judge(
        [tuner.Choice(BASELINE, ()), tuner.Choice("b", ()), tuner.Choice("c", ())], [rounds]
    )
    assert decision.ratios == pytest.approx({BASELINE: 1.0, "b": 0.5, "c": 2.0})
    assert decision.choice.name == "b"


def test_a_small_budget_still_times_the_minimum_rounds() -> None:
    @contextlib.contextmanager
    def slow() -> Iterator[tuner.Turn]:
        yield lambda count, warm: 1.0 * count

    rounds = tuner.time_one_at_a_time({BASELINE: slow, "other": slow}, budget=1e-6)
    assert len(rounds[BASELINE]) == len(rounds["other"]) >= tuner.MIN_ROUNDS


def test_crowded_by_the_room_left_or_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tuning_workers.ENVIRONMENT, raising=False)
    monkeypatch.setattr(candidate_memory, "room", lambda: 1 << 30)
    assert candidate_memory.crowded(100 << 20, 2) is None  # 400 MiB of 1 GiB
    why = candidate_memory.crowded(100 << 20, 3) or ""  # 600 MiB: over half
    assert why == (
        "3 sessions side by side would hold ~0.59 GiB, over half of the 1.00 GiB this process "
        "may still use"
    )
    monkeypatch.setattr(candidate_memory, "room", lambda: None)
    assert candidate_memory.crowded(1 << 40, 9) is None  # nothing known: side by side
    monkeypatch.setenv(tuning_workers.ENVIRONMENT, candidate_memory.ONE_AT_A_TIME)
    assert candidate_memory.crowded(0, 2) == "QUANTGRAPH_TUNING_ISOLATION=one-at-a-time"


def test_the_room_under_an_address_space_limit() -> None:
    """Under `ulimit -v`, the room is what the limit leaves of the address space in use."""
    script = (
        "from quantgraph.runtime import candidate_memory as m\n"
        "import resource\n"
        "soft, _ = resource.getrlimit(resource.RLIMIT_AS)\n"
        "status = open('/proc/self/status').read().split('VmSize:')[1]\n"
        "vm = int(status.split()[0]) << 10\n"
        "print(soft, vm, m.room())\n"
    )
    limit_kib = 3 << 20
    done = subprocess.run(
        ["bash", "-c", f'ulimit -v {limit_kib} && exec "$@"', "-", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    soft, vm, room = (int(part) for part in done.stdout.split())
    assert soft == limit_kib << 10
    assert 0 < room <= soft - vm + (64 << 20)  # VmSize read again in room(): a little later


def test_in_this_process_one_session_alive_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(tuning_workers.ENVIRONMENT, candidate_memory.ONE_AT_A_TIME)
    made: list[weakref.ref[object]] = []
    real = new_session

    def tracked(*args: object, **kwargs: object) -> object:
        assert all(ref() is None for ref in made), "two candidates' sessions alive at once"
        made.append(weakref.ref(session := real(*args, **kwargs)))  # type: ignore[arg-type]
        return session

    monkeypatch.setattr(session_module, "new_session", tracked)
    monkeypatch.setattr(tuning_workers, "one_at_a_time_in_process", lambda feeds: "asked")
    feeds = make_inputs(CNN)
    session = quantgraph.InferenceSession(
        quantgraph.convert(CNN).proto, "native", fusion="auto", tune_inputs=feeds, tuning_budget=0.2
    )
    decision = session.fusion_plan.tuning
    assert decision.source == "measured" and decision.rounds >= tuner.MIN_ROUNDS
    assert decision.isolation == (
        "one at a time, in this process (asked): QUANTGRAPH_TUNING_ISOLATION=one-at-a-time"
    )
    assert decision.to_dict()["isolation"] == decision.isolation
    assert len(made) >= 3  # each candidate made again for its second block, the last once
    session.run(None, feeds)


class _Counted(tuning_workers._Worker):
    """A worker process that counts how many are alive at once."""

    alive = 0
    most = 0
    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _Counted.made += 1
        _Counted.alive += 1
        _Counted.most = max(_Counted.most, _Counted.alive)

    def stop(self) -> None:
        if self._process.poll() is None:
            _Counted.alive -= 1
        super().stop()


@pytest.mark.parametrize("external", [False, True])
def test_each_candidate_in_a_process_of_its_own_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, external: bool
) -> None:
    """The default one at a time: each block in a worker process that ends with it (all it
    held goes with it); weights in external data are not copied for the workers."""
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(tuning_workers.ENVIRONMENT, candidate_memory.ONE_AT_A_TIME)
    monkeypatch.setattr(tuning_workers, "_Worker", _Counted)
    _Counted.alive = _Counted.most = _Counted.made = 0
    model: Path | onnx.ModelProto = quantgraph.convert(CNN).proto
    if external:
        model = tmp_path / "m.onnx"
        quantgraph.convert(CNN).save(model, external_data="m.data")
    feeds = make_inputs(CNN)
    session = quantgraph.InferenceSession(
        model,
        "native",
        fusion="auto",
        tune_inputs=feeds,
        tuning_budget=0.2,
    )
    decision = session.fusion_plan.tuning
    assert decision.source == "measured" and decision.rounds >= tuner.MIN_ROUNDS
    assert decision.isolation == (
        "one at a time, each in a process of its own: QUANTGRAPH_TUNING_ISOLATION=one-at-a-time"
    )
    assert not decision.dropped
    assert _Counted.most == 1 and _Counted.alive == 0
    assert _Counted.made >= 3  # each candidate's worker made again for its second block
    session.run(None, feeds)
