"""Every command's --json output validates against its schema (quantgraph/schemas_json), the
schema files are current, docs/json.md names every field, and errors are JSON too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import helper

import quantgraph
from quantgraph.cli import main
from quantgraph.schemas_json import COMMANDS, DEFS, HERE, render, schema
from tests.builders import requires_onednn

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("json")
    shutil.copy(ROOT / "models" / "cnn_u8.onnx", folder / "cnn.onnx")
    quantgraph.convert(folder / "cnn.onnx").save(folder / "cnn_qg.onnx")
    np.savez(folder / "in.npz", input=np.ones((1, 3, 16, 16), np.float32))
    return folder


def run_json(*args: str | Path, exit_code: int = 0) -> object:
    result: Result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == exit_code, (result.exit_code, result.output)
    return json.loads(result.stdout, parse_constant=_refuse)  # strict JSON: no Infinity, NaN


def _refuse(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


def check(command: str, payload: object) -> None:
    jsonschema.Draft202012Validator(schema(command)).validate(payload)


def test_the_schemas_are_valid_and_their_files_current() -> None:
    for command in COMMANDS:
        jsonschema.Draft202012Validator.check_schema(schema(command))
        assert (HERE / f"{command}.json").read_text() == render(command), (
            f"run python -m quantgraph.schemas_json --write ({command}.json is stale)"
        )


def test_docs_json_md_names_every_field() -> None:
    """A field added to a schema must be documented too."""
    page = (ROOT / "docs" / "json.md").read_text()
    names: set[str] = set()
    for command in COMMANDS:
        for definition in [schema(command), *DEFS.values()]:
            names |= set(definition.get("properties", {}))
    missing = sorted(n for n in names if f"`{n}`" not in page)
    assert not missing, f"docs/json.md does not name: {missing}"


def test_convert_and_lower(work: Path) -> None:
    out, back = work / "c.onnx", work / "l.onnx"
    check("convert", run_json("convert", work / "cnn.onnx", out, "--force", "--json"))
    check("convert", run_json("convert", work / "cnn.onnx", "--dry-run", "--json"))
    validated = run_json(
        "convert", work / "cnn.onnx", out, "--force", "--validate", "--iterations", "2", "--json"
    )
    check("convert", validated)
    assert isinstance(validated, dict) and validated["validation"]["samples"] == 2
    check("lower", run_json("lower", out, back, "--force", "--json"))


def test_validate(work: Path) -> None:
    original, rewritten = work / "cnn.onnx", work / "cnn_qg.onnx"
    check("validate", run_json("validate", original, rewritten, "--json"))
    full = run_json(
        "validate", original, rewritten, "--optimized", "--intermediate", "--atol", "1", "--json"
    )
    check("validate", full)
    check(
        "validate", run_json("validate", original, rewritten, "--inputs", work / "in.npz", "--json")
    )
    python = run_json("validate", original, rewritten, "--backend", "python", "--json")
    check("validate", python)


def test_validate_disagreeing_shapes_print_inf_as_a_string(tmp_path: Path) -> None:
    """Outputs of different shapes: max_abs_diff is inf, which JSON spells "inf"."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])

    def save(
        name: str, node: onnx.NodeProto, shape: list[int], extra: list[onnx.TensorProto]
    ) -> Path:
        y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)
        graph = helper.make_graph([node], "g", [x], [y], extra)
        path = tmp_path / name
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
        return path

    one = save("a.onnx", helper.make_node("Relu", ["x"], ["y"]), [2, 3], [])
    target = helper.make_tensor("s", onnx.TensorProto.INT64, [2], [3, 2])
    two = save("b.onnx", helper.make_node("Reshape", ["x", "s"], ["y"]), [3, 2], [target])
    payload = run_json("validate", one, two, "--json", exit_code=1)
    check("validate", payload)
    assert isinstance(payload, dict) and payload["outputs"][0]["max_abs_diff"] == "inf"


def test_run_and_inspect(work: Path) -> None:
    check("run", run_json("run", work / "cnn_qg.onnx", "--json"))
    given = run_json(
        "run",
        work / "cnn_qg.onnx",
        "--inputs",
        work / "in.npz",
        "--output",
        work / "o.npz",
        "--json",
    )
    check("run", given)
    check("inspect", run_json("inspect", work / "cnn.onnx", "--json"))
    check("inspect", run_json("inspect", work / "cnn.onnx", "--backend", "python", "--json"))


@requires_onednn
def test_onednn_key_in_every_command(work: Path) -> None:
    """One vocabulary: the oneDNN that ran is "onednn" in run, validate and inspect."""
    model, original = work / "cnn_qg.onnx", work / "cnn.onnx"
    ran = run_json("run", model, "--backend", "onednn", "--json")
    validated = run_json(
        "validate", original, model, "--backend", "onednn", "--atol", "1", "--json"
    )
    inspected = run_json("inspect", original, "--backend", "onednn", "--json")
    check("run", ran)
    check("validate", validated)
    check("inspect", inspected)
    assert isinstance(ran, dict) and isinstance(validated, dict) and isinstance(inspected, dict)
    versions = {ran["onednn"], validated["onednn"], inspected["backend_support"]["onednn"]}
    assert len(versions) == 1 and str(versions.pop()).startswith("oneDNN v3.")


def test_bench() -> None:
    rows = run_json(
        "bench",
        "--sizes",
        "1024",
        "--columns",
        "32",
        "--repeat",
        "1",
        "--weights",
        "32x32",
        "--json",
    )
    check("bench", rows)
    assert isinstance(rows, list) and {r["op"] for r in rows} >= {"quantize", "dequantize_4bit"}


def test_dtypes_are_numpy_names_everywhere(work: Path) -> None:
    payload = run_json("validate", work / "cnn.onnx", work / "cnn_qg.onnx", "--json")
    assert isinstance(payload, dict)
    assert payload["inputs"]["input"]["dtype"] == "float32"
    assert payload["outputs"][0]["dtype"] == "float32"
    ran = run_json("run", work / "cnn_qg.onnx", "--json")
    assert isinstance(ran, dict) and ran["outputs"][0]["dtype"] == "float32"


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--sizes", "abc"],
        ["convert", "{cnn}"],  # OUT missing
        ["convert", "{cnn}", "{tmp}/o.onnx", "--dim", "a=1"],  # --dim without --validate
        ["run", "{tmp}/missing.onnx"],
        ["validate", "{cnn}", "{tmp}/missing.onnx"],
        ["inspect", "{tmp}"],
        ["lower", "{cnn}", "{cnn}"],
        ["--bogus", "run", "{cnn}"],
        ["run", "{cnn}", "--inputs", "{tmp}/in.npz"],  # wrong shape
    ],
    ids=lambda a: " ".join(a),
)
def test_errors_under_json_are_json_objects(work: Path, tmp_path: Path, args: list[str]) -> None:
    np.savez(tmp_path / "in.npz", input=np.ones((1, 3, 8, 8), np.float32))
    filled = [a.format(cnn=work / "cnn.onnx", tmp=tmp_path) for a in args]
    result = CliRunner().invoke(main, [*filled, "--json"], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    payload = json.loads(result.stdout)
    check("error", payload)
    assert payload["exit_code"] == 2
    assert payload["error"] in result.stderr  # the same words as the line on stderr
