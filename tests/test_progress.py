"""Long work shows progress (issue 20, item 13; issue 42, item 5): on a terminal a live line on
stderr, with its seconds once a step runs 2 s; piped, one line per stage that runs over 2 s
(nothing for a quick command, never a rewritten line); never under --json. A pseudo-terminal
stands in for the user's. Covered: validate (the input search, the nodes' figures, the
--sensitivity reruns), convert, tune, bench --model and run --fusion auto."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

import quantgraph
from quantgraph import progress
from quantgraph.progress import DELAY, Status, erase, shown

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "models" / "cnn_u8.onnx"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_tty_decision() -> None:
    assert shown(False, Terminal())
    assert not shown(True, Terminal())  # --json
    assert not shown(False, io.StringIO())  # piped or redirected
    closed = io.StringIO()
    closed.close()
    assert not shown(False, closed)  # isatty() raises ValueError


def test_a_status_line_is_rewritten_in_place_and_erased() -> None:
    stream = Terminal()
    with Status("validate", quiet=False, stream=stream) as status:
        status.validation("original", 0, 3)
        status.validation("rewritten", 2, 3)
        assert status.stage == "rewritten"
    text = stream.getvalue()
    assert text == (
        "\r\x1b[Kvalidate: loading the original"
        "\r\x1b[Kvalidate: running the rewritten model: sample 2/3"
        "\r\x1b[K"
    )


def test_erase_clears_a_line_left_by_an_error() -> None:
    stream = Terminal()
    status = Status("validate", quiet=False, stream=stream)
    status.validation("optimized", 1, 4)
    erase()
    assert stream.getvalue().endswith("at ORT_ENABLE_ALL: sample 1/4\r\x1b[K")


@pytest.mark.parametrize(
    ("stream", "quiet"), [(io.StringIO(), False), (Terminal(), True)], ids=["piped", "json"]
)
def test_nothing_is_written_when_not_shown(stream: io.StringIO, quiet: bool) -> None:
    status = Status("validate", quiet=quiet, stream=stream)
    status.validation("rewritten", 1, 1)
    status.close()
    assert stream.getvalue() == ""
    assert status.stage == "rewritten"  # still known: convert --validate names the side


def _run(
    args: list[str | Path], cwd: Path, *, tty: bool, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Run ``python -m quantgraph ARGS`` with stderr on a pseudo-terminal (or a pipe)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    command = [sys.executable, "-m", "quantgraph", *map(str, args)]
    if not tty:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=slave, text=True
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    out = process.stdout.read() if process.stdout else ""
    return process.wait(timeout=300), out, b"".join(chunks).decode()


@pytest.fixture
def models(tmp_path: Path) -> Path:
    shutil.copy(CNN, tmp_path / "cnn.onnx")
    quantgraph.convert(tmp_path / "cnn.onnx").save(tmp_path / "conv.onnx")
    return tmp_path


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_step_shows_its_seconds_on_a_terminal() -> None:
    stream, clock = Terminal(), Clock()
    with Status("tune", quiet=False, stream=stream, clock=clock, ticking=False) as status:
        status.step("measure", "measuring")
        status.tick()  # under DELAY: no seconds
        clock.now = DELAY + 1.2
        status.tick()
    assert stream.getvalue() == (
        "\r\x1b[Ktune: measuring\r\x1b[Ktune: measuring\r\x1b[Ktune: measuring (3 s)\r\x1b[K"
    )


def test_piped_one_line_per_stage_that_runs_over_two_seconds() -> None:
    stream, clock = io.StringIO(), Clock()
    status = Status("validate", quiet=False, stream=stream, clock=clock, ticking=False)
    assert status.mode == progress.LINES and not status.enabled
    status.validation("original", 0, 3)  # quick: never written
    status.validation("rewritten", 0, 3)
    clock.now = 1.0
    status.validation("rewritten", 1, 3)  # a new stage (running), at 1.0
    clock.now = 2.5
    status.tick()  # 1.5 s into it: nothing yet
    clock.now = 3.5
    status.validation("rewritten", 2, 3)  # 2.5 s: its one line
    status.validation("rewritten", 3, 3)
    status.tick()
    status.validation("search", 1, 0)
    clock.now = 9.0
    status.tick()
    status.validation("search", 2, 0)
    status.close()
    assert stream.getvalue() == (
        "validate: running the rewritten model: sample 2/3 ...\n"
        "validate: searching inputs the original accepts: plan 1 ...\n"
    )


def test_the_clock_thread_writes_a_piped_stage_line_and_stops() -> None:
    stream = io.StringIO()
    status = Status("bench", quiet=False, stream=stream)
    original = progress.DELAY
    progress.DELAY = 0.2  # the thread's own clock, shortened
    try:
        with status:
            status.step("rounds", "round 1/5: original")
            deadline = time.monotonic() + 10
            while not stream.getvalue() and time.monotonic() < deadline:
                time.sleep(0.05)
        written = stream.getvalue()
        time.sleep(3 * progress.TICK)
    finally:
        progress.DELAY = original
    assert written == "bench: round 1/5: original ...\n"
    assert stream.getvalue() == written  # closed: the clock writes nothing more
    assert not progress._clocks


def test_validate_reports_the_input_search_and_the_debugger(tmp_path: Path) -> None:
    """The callback hears each plan the search tries after the first, the nodes' own error
    being measured, and each --sensitivity rerun."""
    from tests.test_debugger import _float_model
    from tests.test_validation_budget import recognizer
    from tests.test_validation_inputs import quantize_static

    heard: list[tuple[str, int, int]] = []

    def tell(stage: str, done: int, total: int) -> None:
        heard.append((stage, done, total))

    rng = np.random.default_rng(0)
    sample = {"x": rng.standard_normal((1, 3, 48, 64)).astype(np.float32)}
    original = tmp_path / "rec.onnx"
    onnx.save(quantize_static(recognizer(), [sample]), original)
    report = quantgraph.validate(original, quantgraph.convert(original).proto, progress=tell)
    assert report.input_search is not None
    runs = sum(t.status in ("ran", "failed") for t in report.input_search.tried)
    assert [h for h in heard if h[0] == "search"] == [("search", k, 0) for k in range(1, runs)]
    heard.clear()
    float_path = tmp_path / "float.onnx"
    onnx.save(_float_model(), float_path)
    qdq = quantize_static(_float_model(), [{"x": sample["x"][:, :, :8, :8]}])
    quantgraph.validate(float_path, qdq, sensitivity=3, progress=tell)
    assert ("nodes", 0, 1) in heard
    assert [h for h in heard if h[0] == "sensitivity"] == [("sensitivity", k, 3) for k in (1, 2, 3)]


def test_validate_shows_progress_on_a_terminal(models: Path) -> None:
    args: list[str | Path] = ["validate", "cnn.onnx", "conv.onnx", "--iterations", "3"]
    code, out, err = _run([*args, "--intermediate", "--optimized"], models, tty=True)
    assert code == 0, err
    for step in (
        "validate: loading the original",
        "validate: running the original: sample 3/3",
        "validate: loading the rewritten model",
        "validate: running the rewritten model: sample 3/3",
        "validate: running the original at ORT_ENABLE_ALL: sample 3/3",
    ):
        assert step in err, err
    assert err.endswith("\r\x1b[K")  # the line is gone before the report
    assert "verdict" in out
    code, out, err = _run([*args, "--json"], models, tty=True)
    assert (code, err) == (0, "")
    code, out, err = _run(args, models, tty=False)
    assert code == 0 and _at_most_a_line_per_stage(err)


def _at_most_a_line_per_stage(err: str) -> bool:
    """Piped: no line rewritten in place, and no stage twice."""
    lines = err.splitlines()
    stages = [line.rsplit(":", 1)[0] for line in lines]
    return "\r" not in err and len(stages) == len(set(stages))


def test_convert_validate_shows_progress_on_a_terminal(models: Path) -> None:
    args: list[str | Path] = ["convert", "cnn.onnx", "o.onnx", "--validate"]
    code, _, err = _run(args, models, tty=True)
    assert code == 0, err
    assert "validating: running the rewritten model: sample 1/1" in err
    code, _, err = _run([*args, "--force"], models, tty=False)
    assert code == 0 and _at_most_a_line_per_stage(err)


def test_tune_shows_its_measuring_on_a_terminal_and_at_most_a_line_piped(models: Path) -> None:
    """The tuner reports nothing while it measures: the stage's line (its seconds moving,
    test_a_long_step_shows_its_seconds_on_a_terminal) says it works; piped, that line once if
    the measuring took over 2 s (how long it takes is the CPU's)."""
    measuring = "tune: measuring fusion auto's candidate plans (--budget 0.5 s)"
    args: list[str | Path] = ["tune", "conv.onnx", "--budget", "0.5", "--again"]
    in_process = {"QUANTGRAPH_TUNING_ISOLATION": "none"}  # no worker processes to start: quicker
    code, out, err = _run(args, models, tty=True, env=in_process)
    assert code == 0, err
    assert measuring in err and err.endswith("\r\x1b[K") and "auto: plan" in out
    code, out, err = _run(args, models, tty=False, env=in_process)
    assert code == 0, err
    assert "\r" not in err
    lines = [line for line in err.splitlines() if line.startswith("tune: ")]
    assert lines in ([], [f"{measuring} ..."]), err


def test_bench_model_piped_says_each_stage_once(models: Path) -> None:
    args: list[str | Path] = ["bench", "--model", "cnn.onnx", "conv.onnx", "--rounds", "4"]
    code, out, err = _run([*args, "--processes", "1"], models, tty=False)
    assert code == 0, err
    assert "\r" not in err and len(err.splitlines()) <= 2, err  # 'start', 'rounds'
    assert all(line.startswith("bench: ") for line in err.splitlines())
    assert "original ORT_ENABLE_ALL" in out


def test_run_sums_up_the_plan_per_engine_and_lists_it_with_verbose(models: Path) -> None:
    code, out, err = _run(["run", "conv.onnx", "--fusion", "onnxruntime"], models, tty=False)
    assert code == 0, err
    plan = [line for line in out.splitlines() if line.startswith("  onnxruntime: ")]
    assert len(plan) == 1 and " unit(s), " in plan[0]
    assert "  unit " not in out and "--verbose lists every unit" in out
    code, verbose, err = _run(
        ["run", "conv.onnx", "--fusion", "onnxruntime", "--verbose"], models, tty=False
    )
    assert code == 0, err
    units = [line for line in verbose.splitlines() if line.startswith("  unit ")]
    first = out.splitlines()[1]  # fusion onnxruntime: N unit(s) with ...
    assert first.startswith("fusion onnxruntime: ")
    assert len(units) == int(first.split(": ")[1].split(" ")[0])
