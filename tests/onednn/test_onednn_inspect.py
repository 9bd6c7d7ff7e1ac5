"""inspect --backend: every spec op of the converted model tried alone on a backend, so a user
sees every node oneDNN (or the python backend) refuses, not only the first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx

import quantgraph
from quantgraph.backends import onednn
from quantgraph.runtime.support import REFUSED, RUNS, node_support
from tests.builders import requires_native, requires_onednn
from tests.test_weight_only import quantized

ROOT = Path(__file__).resolve().parents[2]


def _inspect(model: Path, *options: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "quantgraph", "inspect", str(model), "--json", *options],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    support: dict[str, object] = json.loads(done.stdout)["backend_support"]
    return support


@requires_onednn
def test_every_node_of_the_bundled_cnn_runs_on_onednn() -> None:
    support = _inspect(ROOT / "models" / "cnn_u8.onnx", "--backend", "onednn")
    assert str(support["onednn"]).startswith("oneDNN v3.")
    nodes = support["nodes"]
    assert isinstance(nodes, list) and len(nodes) == 17
    assert {n["status"] for n in nodes} == {RUNS}


@requires_onednn
def test_int4_weights_every_refusal_is_listed(tmp_path: Path) -> None:
    path = tmp_path / "int4.onnx"
    onnx.save(quantized(False, 32), path)
    nodes = _inspect(path, "--backend", "onednn")["nodes"]
    assert isinstance(nodes, list) and len(nodes) == 2
    if onednn.version_tuple() >= (3, 7, 0):  # measured on v3.13.2
        assert {n["status"] for n in nodes} == {RUNS}
        return
    for node in nodes:
        assert node["status"] == REFUSED
        assert f"node '{node['node']}'" in node["reason"] and "per_group" in node["reason"]


def test_the_python_backend_says_which_nodes_it_cannot_carry() -> None:
    found = node_support(quantgraph.convert(quantized(True, 32)).model, "python")
    assert [s.status for s in found] == [REFUSED, REFUSED]
    assert all("4-bit" in s.reason and s.node in s.reason for s in found)


@requires_native
def test_native_runs_every_node() -> None:
    found = node_support(quantgraph.convert(quantized(True, 32)).model, "native")
    assert [s.status for s in found] == [RUNS, RUNS]
