"""fusion "auto" times each candidate plan in a worker process of its own (issue #33: timed in
one process, sessions disturbed each other's measurements): the workers answer, a failing one
is named in one line, an interrupt leaves neither processes nor files, and where workers would
copy too much the measurement says it stayed in-process and why."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import quantgraph
from quantgraph.fusion.auto import tuner
from quantgraph.runtime import tuning_workers
from quantgraph.runtime.tuning_workers import Job, Settings, WorkerFailed, worker_turns
from quantgraph.validation import make_inputs
from tests.builders import requires_onednn

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "models" / "cnn_u8.onnx"
SETTINGS = Settings("native", "onnx", 99, 1, ("CPUExecutionProvider",))


def _add(op: str = "Add", domain: str = "") -> ir.Model:
    node = helper.make_node(op, ["x", "x"], ["y"], domain=domain)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    graph = helper.make_graph([node], "g", [x], [y])
    return ir.from_proto(helper.make_model(graph, opset_imports=opsets))


def test_workers_answer_turns_and_end_with_the_context(tmp_path: Path) -> None:
    feeds = {"x": np.arange(4, dtype=np.float32)}
    jobs = {"a": Job(_add(), False), "b": Job(_add("Mul"), False)}
    with worker_turns(jobs, feeds, SETTINGS) as turns:
        assert list(turns) == ["a", "b"]
        seconds = turns["b"](5, 1)
        assert 0 < seconds < 5
        per_round = tuner.time_turns(turns, budget=0.2)
    assert set(per_round) == {"a", "b"} and len(per_round["a"]) >= tuner.MIN_ROUNDS
    assert all(t > 0 for v in per_round.values() for t in v)


def test_a_failing_worker_is_named_in_one_line() -> None:
    feeds = {"x": np.arange(4, dtype=np.float32)}
    jobs = {"onnxruntime": Job(_add(), False), "broken": Job(_add("Nope", "x.y"), False)}
    with pytest.raises(WorkerFailed) as raised, worker_turns(jobs, feeds, SETTINGS):
        pass
    message = str(raised.value)
    assert message.startswith("fusion auto: the worker timing plan 'broken' ended")
    assert "Nope" in message and "\n" not in message


def _reshape_to_three() -> ir.Model:
    """Made fine, fails to run on four values (x's length is not known before)."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [3])
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    graph = helper.make_graph([node], "g", [x], [y], [shape])
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_a_dropped_worker_says_whether_its_session_was_made() -> None:
    """A candidate dropped for its worker's failure: what failed (its session made, or run)
    and the worker's own error, onnxruntime's wrapping left out."""
    feeds = {"x": np.arange(4, dtype=np.float32)}
    jobs = {
        "onnxruntime": Job(_add(), False),
        "unknown op": Job(_add("Nope", "x.y"), False),
        "reshape": Job(_reshape_to_three(), False),
    }
    dropped: tuner.Dropped = {}
    with worker_turns(jobs, feeds, SETTINGS, dropped) as turns:
        assert list(turns) == ["onnxruntime"]
    assert dropped["unknown op"].startswith(f"{tuner.MAKING}: ")
    assert "Nope" in dropped["unknown op"]
    assert dropped["reshape"].startswith(f"{tuner.RUNNING}: ")
    assert "Reshape node" in dropped["reshape"]
    assert all(r.endswith("(in its worker process)") for r in dropped.values())
    assert not any("ONNXRuntimeError" in r or "\n" in r for r in dropped.values())


def test_in_process_when_workers_would_copy_too_much(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _add()
    feeds = {"x": np.zeros(4, np.float32)}
    assert tuning_workers.in_process(model, feeds, 0) is None
    monkeypatch.setattr(tuning_workers, "LARGEST_MODEL", 0)
    assert "MiB of weights" in (tuning_workers.in_process(model, feeds, 16) or "")
    strings = {"x": np.array(["a"], dtype=object)}
    monkeypatch.setattr(tuning_workers, "LARGEST_MODEL", 1 << 30)
    assert tuning_workers.in_process(model, strings, 16) == "inputs of strings or objects"
    monkeypatch.setenv(tuning_workers.ENVIRONMENT, "none")
    assert tuning_workers.in_process(model, feeds, 16) == f"{tuning_workers.ENVIRONMENT}=none"


@requires_onednn
@pytest.mark.parametrize("isolation", ["process", "none"])
def test_the_decision_says_how_it_was_measured(
    isolation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUANTGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(tuning_workers.ENVIRONMENT, isolation)
    feeds = make_inputs(CNN)
    session = quantgraph.InferenceSession(
        quantgraph.convert(CNN).proto,
        "native",
        fusion="auto",
        tune_inputs=feeds,
        tuning_budget=0.3,
    )
    decision = session.fusion_plan.tuning
    assert decision.source == "measured"
    expected = "processes" if isolation == "process" else "in-process: "
    assert decision.isolation.startswith(expected)
    assert decision.to_dict()["isolation"] == decision.isolation


@requires_onednn
def test_ctrl_c_while_tuning_leaves_no_worker_and_no_file(tmp_path: Path) -> None:
    model = tmp_path / "cnn_qg.onnx"
    quantgraph.convert(CNN).save(model)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(scratch),
        "QUANTGRAPH_CACHE_DIR": str(tmp_path / "cache"),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "quantgraph", "tune", str(model), "--budget", "120"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(scratch.glob("quantgraph-tuning-*/*/stderr.txt")):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr
        time.sleep(0.05)
    workers = _workers_of(process.pid)
    while not workers and time.monotonic() < deadline:
        time.sleep(0.05)
        workers = _workers_of(process.pid)
    assert workers
    time.sleep(1.0)  # the workers are building or timing
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == (
        "quantgraph: interrupted (nothing half-written was left behind)"
    )
    # .ses: onnxruntime's import writes its session id file into TMPDIR, ours or not
    assert [p.name for p in scratch.iterdir() if p.name != ".ses"] == []
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and _alive(pid)]


def _workers_of(parent: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if f"\nPPid:\t{parent}\n" in text:
            found.append(int(status.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


def test_a_worker_reads_its_settings_from_one_line(tmp_path: Path) -> None:
    """The protocol as the module docstring states it, driven by hand."""
    model = tmp_path / "m.onnx"
    onnx.save(ir.to_proto(_add()), model)
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, np.ones(4, np.float32))
    settings = json.dumps(
        {
            "model": str(model),
            "inputs": str(inputs),
            "names": ["x"],
            "partitions": False,
            "backend": "native",
            "arithmetic": "onnx",
            "level": 1,
            "threads": 1,
            "providers": ["CPUExecutionProvider"],
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "quantgraph.runtime.tuning_workers"],
        input=settings + "\n3 1\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=True,
    )
    ready, seconds = done.stdout.splitlines()
    assert ready == "ready" and float(seconds) > 0
