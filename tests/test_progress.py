"""Long work shows progress on a terminal, and only there (issue 20, item 13): on stderr when it
is a TTY, never under --json, never when piped. A pseudo-terminal stands in for the user's."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import quantgraph
from quantgraph.progress import Status, erase, shown

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


def _run(args: list[str | Path], cwd: Path, *, tty: bool) -> tuple[int, str, str]:
    """Run ``python -m quantgraph ARGS`` with stderr on a pseudo-terminal (or a pipe)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
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
    assert (code, err) == (0, "")


def test_convert_validate_shows_progress_on_a_terminal(models: Path) -> None:
    args: list[str | Path] = ["convert", "cnn.onnx", "o.onnx", "--validate"]
    code, _, err = _run(args, models, tty=True)
    assert code == 0, err
    assert "validating: running the rewritten model: sample 1/1" in err
    code, _, err = _run([*args, "--force"], models, tty=False)
    assert (code, err) == (0, "")
