"""The command line: convert, validate, run, inspect; exit codes, JSON, and one-line errors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import numpy_helper

import quantgraph
from quantgraph import DOMAIN
from quantgraph.backends import native_available
from quantgraph.cli import main
from quantgraph.testing import ort_session
from tests.bad_models import cyclic_model

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
CNN = MODELS / "cnn_u8.onnx"
TRANSFORMER = MODELS / "transformer_s8.onnx"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A private copy of two bundled models (so nothing is ever written beside the originals)."""
    shutil.copy(CNN, tmp_path / "cnn.onnx")
    shutil.copy(TRANSFORMER, tmp_path / "transformer.onnx")
    return tmp_path


def invoke(runner: CliRunner, *args: str | Path) -> Result:
    return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_one_line_error(result: Result | subprocess.CompletedProcess[str]) -> str:
    code = result.exit_code if isinstance(result, Result) else result.returncode
    assert code == 2, (code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("quantgraph: error:"), lines[0]
    return lines[0]


def cnn_inputs(path: Path, seed: int = 1) -> Path:
    npz = path / f"inputs_{seed}.npz"
    x = np.random.default_rng(seed).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(npz, input=x)
    return npz


# -- help ---------------------------------------------------------------------------------------


HELP_COMMANDS = ["", *sorted({"convert", "validate", "run", "inspect", *main.commands})]


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_help_exits_zero(runner: CliRunner, command: str) -> None:
    args = [command, "--help"] if command else ["--help"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout


# -- convert ------------------------------------------------------------------------------------


def test_convert_writes_the_model_and_keeps_the_input(runner: CliRunner, work: Path) -> None:
    source, out = work / "cnn.onnx", work / "out" / "cnn_converted.onnx"
    digest = sha256(source)
    result = invoke(runner, "convert", source, out)
    assert result.exit_code == 0, result.output
    assert sha256(source) == digest
    assert "converted 17 node(s)" in result.stdout
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    assert {n.op_type for n in model.graph.node if n.domain == DOMAIN} == {
        "DynamicQuantize",
        "DynamicDequantize",
    }
    expected = quantgraph.convert(source).proto.SerializeToString(deterministic=True)
    assert out.read_bytes() == expected


def test_convert_json(runner: CliRunner, work: Path) -> None:
    result = invoke(runner, "convert", work / "cnn.onnx", work / "o.onnx", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["converted"] == {"DequantizeLinear": 10, "QuantizeLinear": 7}
    assert payload["converted"] == quantgraph.convert(CNN).report.converted
    assert len(payload["skipped"]) == 3
    for item in payload["skipped"]:
        assert {"node", "op_type", "reason"} <= item.keys()
        assert item["op_type"] == "DequantizeLinear"
        assert item["node"].endswith("_b_DequantizeLinear")
        assert "int32" in item["reason"]


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_convert_validate_python_backend(runner: CliRunner, work: Path, static: bool) -> None:
    args: list[str | Path] = [
        "convert",
        work / "cnn.onnx",
        work / "o.onnx",
        "--validate",
        "--backend",
        "python",
    ]
    result = invoke(runner, *args, "--json", *(["--static"] if static else []))
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    validation = payload["validation"]
    assert validation["agree"] is True
    assert validation["backend"] == "python"
    assert "ORT_DISABLE_ALL" in validation["comparison"]
    assert [(o["max_abs_diff"], o["mismatches"]) for o in validation["outputs"]] == [(0, 0)]
    text = invoke(runner, *args, "--force")
    assert text.exit_code == 0, text.output
    assert "the models agree" in text.stdout


def test_convert_validate_with_dim(runner: CliRunner, work: Path) -> None:
    result = invoke(
        runner,
        "convert",
        work / "transformer.onnx",
        work / "t.onnx",
        "--validate",
        "--backend",
        "python",
        "--dim",
        "batch=3",
        "--json",
    )
    assert result.exit_code == 0, result.output
    validation = json.loads(result.stdout)["validation"]
    assert validation["inputs"]["input"]["shape"] == [3, 8, 32]
    assert validation["outputs"][0]["shape"] == [3, 8, 32]
    assert validation["agree"] is True


def test_convert_dry_run_writes_nothing(runner: CliRunner, work: Path) -> None:
    out = work / "never.onnx"
    result = invoke(runner, "convert", work / "cnn.onnx", out, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "would convert" in result.stdout
    assert not out.exists()


def test_convert_refuses_to_overwrite(runner: CliRunner, work: Path) -> None:
    source, out = work / "cnn.onnx", work / "o.onnx"
    out.write_bytes(b"keep me")
    digest = sha256(source)
    line = assert_one_line_error(invoke(runner, "convert", source, out))
    assert "exists" in line and "--force" in line
    assert out.read_bytes() == b"keep me"
    line = assert_one_line_error(invoke(runner, "convert", source, source))
    assert "input" in line
    line = assert_one_line_error(invoke(runner, "convert", source, work / "." / "cnn.onnx"))
    assert sha256(source) == digest
    forced = invoke(runner, "convert", source, out, "--force")
    assert forced.exit_code == 0, forced.output
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    # --force never lets OUT be IN either.
    assert_one_line_error(invoke(runner, "convert", source, source, "--force"))
    assert sha256(source) == digest


# -- validate -----------------------------------------------------------------------------------


def _converted(work: Path, name: str = "cnn.onnx", *, static: bool = False) -> Path:
    out = work / f"converted_{static}_{name}"
    out.write_bytes(
        quantgraph.convert(work / name, static=static).proto.SerializeToString(deterministic=True)
    )
    return out


def _broken(work: Path) -> Path:
    """The converted CNN with its output quantization scale doubled."""
    model = quantgraph.convert(work / "cnn.onnx").proto
    (q_node,) = [n for n in model.graph.node if n.name == "output_QuantizeLinear"]
    scale_name = q_node.input[1]
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == scale_name:
            doubled = numpy_helper.to_array(tensor) * np.float32(2)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(doubled, scale_name))
            break
    else:
        pytest.fail(f"no initializer {scale_name}")
    # The DQ of the same scale stays, so the output is off by a factor.
    out = work / "broken.onnx"
    onnx.save(model, str(out))
    return out


def test_validate_agree_exit_0_and_json(runner: CliRunner, work: Path) -> None:
    rewritten = _converted(work)
    result = invoke(
        runner, "validate", work / "cnn.onnx", rewritten, "--backend", "python", "--json"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["agree"] is True
    assert "ORT_DISABLE_ALL" in payload["comparison"]
    assert [o["name"] for o in payload["outputs"]] == ["output"]
    for output in payload["outputs"]:
        assert output["max_abs_diff"] == 0
        assert output["mismatches"] == 0
    text = invoke(runner, "validate", work / "cnn.onnx", rewritten, "--backend", "python")
    assert text.exit_code == 0
    assert "the models agree" in text.stdout


def test_validate_disagree_exit_1(runner: CliRunner, work: Path) -> None:
    broken = _broken(work)
    result = invoke(runner, "validate", work / "cnn.onnx", broken, "--json")
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert payload["agree"] is False
    (output,) = payload["outputs"]
    assert output["name"] == "output"
    assert output["mismatches"] > 0
    assert output["max_abs_diff"] > 0
    text = invoke(runner, "validate", work / "cnn.onnx", broken)
    assert text.exit_code == 1
    assert "DISAGREE" in text.stdout
    assert "Traceback" not in text.stderr


def test_validate_with_inputs_npz(runner: CliRunner, work: Path) -> None:
    npz = cnn_inputs(work)
    result = invoke(
        runner,
        "validate",
        work / "cnn.onnx",
        _converted(work, static=True),
        "--inputs",
        npz,
        "--json",
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["agree"] is True
    assert payload["inputs"] == {
        "input": {"dtype": "float32", "shape": [1, 3, 16, 16], "from": "--inputs"}
    }
    assert payload["seed"] is None
    # The same inputs make the broken model disagree too.
    broken = invoke(runner, "validate", work / "cnn.onnx", _broken(work), "--inputs", npz)
    assert broken.exit_code == 1


def test_validate_with_dim(runner: CliRunner, work: Path) -> None:
    rewritten = _converted(work, "transformer.onnx")
    result = invoke(
        runner, "validate", work / "transformer.onnx", rewritten, "--dim", "batch=3", "--json"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["inputs"] == {
        "input": {
            "dtype": "float32",
            "shape": [3, 8, 32],
            "range": None,
            "why": "standard normal",
            "shape_from": ["--dim batch=3", "model", "model"],
        }
    }
    assert payload["agree"] is True


def test_validate_errors_exit_2(runner: CliRunner, work: Path) -> None:
    line = assert_one_line_error(invoke(runner, "validate", work / "cnn.onnx", work / "nope.onnx"))
    assert "nope.onnx" in line
    wrong = work / "wrong.npz"
    np.savez(wrong, not_an_input=np.zeros(3, np.float32))
    assert_one_line_error(
        invoke(runner, "validate", work / "cnn.onnx", _converted(work), "--inputs", wrong)
    )


# -- run, inspect -------------------------------------------------------------------------------


def test_run_inputs_and_output_npz(runner: CliRunner, work: Path) -> None:
    npz, out = cnn_inputs(work, seed=4), work / "outputs.npz"
    rewritten = _converted(work)
    result = invoke(runner, "run", rewritten, "--inputs", npz, "--output", out, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["output_file"] == str(out)
    assert [o["name"] for o in payload["outputs"]] == ["output"]
    assert payload["outputs"][0]["shape"] == [1, 10]
    with np.load(npz) as data:
        feeds = {k: data[k] for k in data.files}
    with np.load(out) as data:
        assert data.files == ["output"]
        written = data["output"]
    (expected,) = ort_session(CNN).run(None, feeds)
    assert written.dtype == expected.dtype and written.shape == expected.shape
    assert written.tobytes() == expected.tobytes()
    text = invoke(runner, "run", rewritten, "--inputs", npz)
    assert text.exit_code == 0
    assert "output" in text.stdout


def test_run_output_file_is_where_it_says(runner: CliRunner, work: Path) -> None:
    result = invoke(
        runner,
        "run",
        _converted(work),
        "--inputs",
        cnn_inputs(work),
        "--output",
        work / "o.bin",
        "--json",
    )
    assert result.exit_code == 0, result.output
    reported = Path(json.loads(result.stdout)["output_file"])
    assert reported.is_file()
    with np.load(reported) as data:
        assert data.files == ["output"]


def test_run_with_dim(runner: CliRunner, work: Path) -> None:
    rewritten = _converted(work, "transformer.onnx")
    result = invoke(runner, "run", rewritten, "--dim", "batch=3", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outputs"][0]["shape"] == [3, 8, 32]


def test_bad_dim_is_a_usage_error(runner: CliRunner, work: Path) -> None:
    result = runner.invoke(main, ["run", str(_converted(work)), "--dim", "batch"])
    assert result.exit_code == 2
    assert "--dim" in result.stderr
    assert "Traceback" not in result.stderr


def test_convert_bad_dim_writes_nothing(runner: CliRunner, work: Path) -> None:
    out = work / "t.onnx"
    result = runner.invoke(
        main, ["convert", str(work / "transformer.onnx"), str(out), "--validate", "--dim", "batch"]
    )
    assert result.exit_code == 2
    assert "--dim" in result.stderr
    assert not out.exists()


def test_inspect(runner: CliRunner, work: Path) -> None:
    before = sorted(p.name for p in work.iterdir())
    result = invoke(runner, "inspect", work / "cnn.onnx", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["converted"] == {"DequantizeLinear": 10, "QuantizeLinear": 7}
    assert [s["op_type"] for s in payload["skipped"]] == ["DequantizeLinear"] * 3
    text = invoke(runner, "inspect", work / "cnn.onnx")
    assert text.exit_code == 0
    assert "would convert 17 node(s)" in text.stdout
    assert "int32" in text.stdout
    assert sorted(p.name for p in work.iterdir()) == before, "inspect wrote a file"


# -- errors -------------------------------------------------------------------------------------


def _bad_inputs(work: Path) -> dict[str, Path]:
    random_bytes = work / "random.onnx"
    random_bytes.write_bytes(np.random.default_rng(0).bytes(4096))
    empty = work / "empty.onnx"
    empty.write_bytes(b"")
    directory = work / "dir.onnx"
    directory.mkdir()
    cycle = work / "cycle.onnx"
    onnx.save(cyclic_model(), cycle)
    return {
        "missing": work / "missing.onnx",
        "random": random_bytes,
        "empty": empty,
        "directory": directory,
        "cycle": cycle,
    }


@pytest.mark.parametrize("kind", ["missing", "random", "empty", "directory", "cycle"])
@pytest.mark.parametrize(
    "command", ["convert", "lower", "validate-original", "validate-rewritten", "run", "inspect"]
)
def test_bad_model_files_are_one_line_errors(
    runner: CliRunner, work: Path, command: str, kind: str
) -> None:
    bad = _bad_inputs(work)[kind]
    good = work / "cnn.onnx"
    every: dict[str, list[str | Path]] = {
        "convert": ["convert", bad, work / "o.onnx"],
        "lower": ["lower", bad, work / "o.onnx"],
        "validate-original": ["validate", bad, good],
        "validate-rewritten": ["validate", good, bad],
        "run": ["run", bad],
        "inspect": ["inspect", bad],
    }
    args = every[command]
    line = assert_one_line_error(invoke(runner, *args))
    assert bad.name in line
    if kind == "cycle":
        assert "graph 'g' has a cycle: 'add' (Add) -> 'q' (QuantizeLinear) -> 'dq'" in line
    assert not (work / "o.onnx").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--debug", "inspect", "{missing}"],
        ["inspect", "--debug", "{missing}"],
        ["inspect", "{missing}", "--debug"],
        ["convert", "--debug", "{missing}", "{out}"],
        ["lower", "{missing}", "{out}", "--debug", "--force"],
    ],
    ids=["before", "after-command", "at-end", "convert", "lower"],
)
def test_debug_shows_the_traceback_and_still_exits_2(
    runner: CliRunner, work: Path, args: list[str]
) -> None:
    """--debug anywhere on the line (issue 20, item 7): the traceback, and exit code 2."""
    filled = [a.format(missing=work / "missing.onnx", out=work / "o.onnx") for a in args]
    result = runner.invoke(main, filled)
    assert result.exit_code == 2, result.output
    assert "Traceback (most recent call last)" in result.stderr
    assert "ModelError" in result.stderr and "missing.onnx: no such file" in result.stderr
    assert not (work / "o.onnx").exists()


def test_debug_after_a_double_dash_is_an_argument(runner: CliRunner, work: Path) -> None:
    result = runner.invoke(main, ["inspect", "--", "--debug"])
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    assert "--debug: no such file" in result.stderr


def _subprocess(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "quantgraph.cli", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_real_process_error_is_one_line_and_debug_shows_traceback(work: Path) -> None:
    random_bytes = _bad_inputs(work)["random"]
    plain = _subprocess("convert", random_bytes, work / "o.onnx", cwd=work)
    line = assert_one_line_error(plain)
    assert "random.onnx" in line
    debug = _subprocess("convert", random_bytes, work / "o.onnx", "--debug", cwd=work)
    assert debug.returncode == 2
    assert "Traceback" in debug.stderr
    assert "ModelError" in debug.stderr


def test_real_process_convert_validate(work: Path) -> None:
    out = work / "o.onnx"
    done = _subprocess(
        "convert", work / "cnn.onnx", out, "--validate", "--backend", "python", "--json", cwd=work
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    payload = json.loads(done.stdout)
    assert payload["validation"]["agree"] is True
    assert out.exists()


def test_convert_validate_parses_its_input_once(
    runner: CliRunner, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """convert IN OUT --validate reads IN once and validates the model it holds in memory:
    neither IN nor OUT is parsed again (onnxruntime opens IN itself for the original)."""
    parsed: list[str] = []
    real_load, real_from_string = onnx.load, onnx.load_from_string

    def load(path: object, *args: object, **kwargs: object) -> onnx.ModelProto:
        parsed.append(str(path))
        return real_load(path, *args, **kwargs)  # type: ignore[arg-type]

    def from_string(data: bytes, *args: object, **kwargs: object) -> onnx.ModelProto:
        parsed.append("<bytes>")
        return real_from_string(data, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx, "load", load)
    monkeypatch.setattr(onnx, "load_model", load)
    monkeypatch.setattr(onnx, "load_from_string", from_string)
    source, out = work / "cnn.onnx", work / "cnn_qg.onnx"
    for backend in ("python", "native") if native_available() else ("python",):
        parsed.clear()
        result = invoke(
            runner, "convert", source, out, "--validate", "--force", "--backend", backend
        )
        assert result.exit_code == 0, result.output
        assert "the models agree" in result.stdout
        assert parsed == [str(source)], backend


def test_a_converted_model_says_what_was_already_converted(tmp_path: Path) -> None:
    converted = tmp_path / "cnn_qg.onnx"
    quantgraph.convert(ROOT / "models" / "cnn_u8.onnx").save(converted)
    again = quantgraph.convert(converted)
    assert again.report.converted == {}
    assert again.report.already == {"DynamicDequantize": 10, "DynamicQuantize": 7}
    assert quantgraph.convert(ROOT / "models" / "cnn_u8.onnx").report.already == {}
    lowered = quantgraph.lower(converted)  # the int32 biases stayed DequantizeLinear
    assert lowered.report.already == {"DequantizeLinear": 3}
    runner = CliRunner()
    text = runner.invoke(main, ["inspect", str(converted)])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0] == (
        "already converted: 17 spec ops (10 DynamicDequantize, 7 DynamicQuantize), "
        "nothing left to rewrite"
    )
    payload = json.loads(runner.invoke(main, ["inspect", str(converted), "--json"]).output)
    assert payload["already"] == {"DynamicDequantize": 10, "DynamicQuantize": 7}


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """`quantgraph inspect MODEL | head -1`: exit 141 (SIGPIPE's code), no error line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "quantgraph", "inspect", str(ROOT / "models" / "cnn_u8.onnx")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    process.stdout.close()  # before the command writes anything
    _, err = process.communicate(timeout=120)
    assert process.returncode == 141, err
    assert err == b""
