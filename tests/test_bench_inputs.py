"""bench --model's inputs (issue 32, item 2): --dim, --val-range and --seed plan them as
validate plans its first sample, --inputs gives one sample; every timed process is fed that
sample, and the JSON says what it was."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner, Result

import quantgraph
from quantgraph.cli import main
from quantgraph.schemas_json import schema
from quantgraph.validation import make_inputs
from tests.builders import requires_native

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "transformer_s8.onnx"  # input: float32[batch, 8, 32]
QUICK = ["--rounds", "1", "--repeat", "1", "--processes", "1", "--fusions", "none"]

# In every timed process: each run's feeds (name -> shape and a checksum) go to a file.
RECORDING_RUN = """
import json, os
import onnxruntime
_run = onnxruntime.InferenceSession.run
def run(self, output_names, feeds, *args, **kwargs):
    seen = {k: [list(v.shape), float(v.astype("float64").sum())] for k, v in feeds.items()}
    with open(os.environ["QG_TEST_FEEDS"], "a") as out:
        out.write(json.dumps(seen) + "\\n")
    return _run(self, output_names, feeds, *args, **kwargs)
onnxruntime.InferenceSession.run = run
"""


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench_inputs") / "tr_qg.onnx"
    quantgraph.convert(MODEL).save(path)
    return path


def bench(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["bench", *map(str, args)], catch_exceptions=False)


def _recorded(path: Path) -> list[dict[str, list[object]]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@requires_native
def test_dims_and_seed_plan_the_sample_every_process_is_fed(
    rewritten: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sitecustomize.py").write_text(RECORDING_RUN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("QG_TEST_FEEDS", str(tmp_path / "feeds"))
    options = ["--dim", "batch=3", "--val-range", "input:-2,2", "--seed", "4"]
    result = bench("--model", MODEL, rewritten, *QUICK, *options, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema("bench")).validate(rows)
    assert len(rows) == 3 and all(row["error"] is None for row in rows)
    described = rows[0]["inputs"]["input"]
    assert described["shape"] == [3, 8, 32] and described["range"] == [-2, 2]
    assert described["shape_from"][0] == "--dim batch=3"
    assert all(row["inputs"] == rows[0]["inputs"] for row in rows)
    # validate's first sample for the same options, in every call of every process
    expected = make_inputs(MODEL, seed=4, dims={"batch": 3}, val_ranges={"input": (-2, 2)})
    want = {"input": [[3, 8, 32], float(expected["input"].astype("float64").sum())]}
    seen = _recorded(tmp_path / "feeds")
    assert len(seen) >= 3 * 4  # 3 variants: 3 warm-up calls and a turn's call at least
    assert all(calls == want for calls in seen), seen[0]
    validated = CliRunner().invoke(
        main, ["validate", str(MODEL), str(rewritten), *options, "--json"]
    )
    assert json.loads(validated.stdout)["inputs"] == rows[0]["inputs"]


@requires_native
def test_inputs_file_is_the_sample_timed(rewritten: Path, tmp_path: Path) -> None:
    sample = tmp_path / "two.npz"
    np.savez(sample, input=np.full((2, 8, 32), 0.5, np.float32))
    text = bench("--model", MODEL, rewritten, *QUICK, "--inputs", sample)
    assert text.exit_code == 0, text.output
    assert f"inputs (from {sample}): input: float32[2,8,32]" in text.stdout.splitlines()
    rows = json.loads(
        bench("--model", MODEL, rewritten, *QUICK, "--inputs", sample, "--json").stdout
    )
    assert rows[0]["inputs"] == {
        "input": {"dtype": "float32", "shape": [2, 8, 32], "from": "--inputs"}
    }
    assert all(row["error"] is None for row in rows)


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (["--dim", "batch=2"], "Error: --dim applies only with --model"),
        (
            ["--val-range", "input:0,1", "--seed", "3"],
            "Error: --val-range, --seed apply only with --model",
        ),
        (
            ["--model", "M", "R", "--inputs", "S", "--dim", "batch=2"],
            "Error: --dim applies only to generated inputs, not with --inputs",
        ),
        (
            ["--model", "M", "R", "--dim", "nosuch=2"],
            "Error: Invalid value for '--dim': 'nosuch=2': no input dim of the model is named "
            "'nosuch' (named dims: batch); an axis of an input (input) binds as INPUT:AXIS=VALUE",
        ),
        (
            ["--model", "M", "R", "--inputs", "B"],
            "quantgraph: error: {B}: input 'input' is float64[2,8,32]; the model expects "
            "float32[?,8,32] (inputs are not converted)",
        ),
    ],
    ids=["dim-alone", "range-seed-alone", "dim-with-inputs", "unknown-dim", "bad-file"],
)
def test_bench_input_options_are_refused_before_anything_is_timed(
    rewritten: Path, tmp_path: Path, arguments: list[str], line: str
) -> None:
    sample, wrong = tmp_path / "s.npz", tmp_path / "b.npz"
    np.savez(sample, input=np.zeros((2, 8, 32), np.float32))
    np.savez(wrong, input=np.zeros((2, 8, 32), np.float64))
    names = {"M": MODEL, "R": rewritten, "S": sample, "B": wrong}
    result = bench(*[names.get(a, a) for a in arguments])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == line.format(B=wrong)
    assert "round 1" not in result.stderr  # nothing was started


def test_the_api_refuses_dims_with_given_inputs() -> None:
    from quantgraph.bench.models import bench_models

    feeds = make_inputs(MODEL)
    with pytest.raises(ValueError, match="dims and val_ranges shape generated inputs only"):
        bench_models(MODEL, MODEL, inputs=feeds, dims={"batch": 2})
