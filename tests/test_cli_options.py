"""Bad option values and input files: click-style usage errors naming the option, one-line
errors naming the file and input (issue 20, items 8, 10, 12, 14)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result

import quantgraph
from quantgraph.cli import main
from quantgraph.cpu import cpu
from quantgraph.errors import ModelError
from quantgraph.validation import input_samples, load_inputs

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "models" / "cnn_u8.onnx"
TRANSFORMER = ROOT / "models" / "transformer_s8.onnx"
CNN_SHAPE = (1, 3, 16, 16)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cnn.onnx and its conversion cnn_qg.onnx, transformer.onnx and tr_qg.onnx."""
    folder = tmp_path_factory.mktemp("models")
    for source, name in ((CNN, "cnn"), (TRANSFORMER, "tr")):
        shutil.copy(source, folder / f"{name}.onnx")
        quantgraph.convert(folder / f"{name}.onnx").save(folder / f"{name}_qg.onnx")
    return folder


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def usage_error(result: Result, option: str) -> str:
    """The click usage error: exit 2, names ``option``, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.stderr
    assert f"Invalid value for '{option}'" in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quantgraph: error: "), result.stderr
    return lines[0].removeprefix("quantgraph: error: ")


# -- bench options (item 10) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--sizes", "abc", "'abc': expected comma-separated integers >= 1"),
        ("--sizes", "-5", "'-5': expected comma-separated integers >= 1"),
        ("--sizes", "0", "'0': expected comma-separated integers >= 1"),
        ("--sizes", "1000,,5", "an empty item in '1000,,5'"),
        ("--sizes", "1e3", "'1e3'"),
        ("--columns", "x", "'x': expected comma-separated integers >= 1"),
        ("--weights", "33x32", "'33x32': expected KxN with K and N positive multiples of 32"),
        ("--weights", "64x64,0x32", "'0x32' in '64x64,0x32'"),
        ("--weights", "64", "'64': expected KxN"),
        ("--repeat", "0", "0 is not in the range x>=1"),
        ("--threads", "-1", "-1 is not in the range x>=0"),
    ],
)
def test_bad_bench_values_are_usage_errors(option: str, value: str, says: str) -> None:
    line = usage_error(invoke("bench", option, value), option)
    assert says in line


def test_bench_columns_wider_than_a_size_are_refused() -> None:
    """[n // C, C] with C > n is an empty tensor: timing it would measure nothing."""
    line = usage_error(invoke("bench", "--sizes", "10"), "--columns")
    assert "384 columns leave no row for a size of 10 elements" in line


def test_bench_values_parse_into_what_run_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    from quantgraph.bench import kernels as bench

    seen: dict[str, object] = {}
    monkeypatch.setattr(bench, "run", lambda **kwargs: seen.update(kwargs) or [])
    result = invoke(
        "bench", "--sizes", " 64, 1024 ", "--columns", "", "--weights", "32x64,4096X32", "--json"
    )
    assert result.exit_code == 0, result.output
    assert seen["sizes"] == (64, 1024)
    assert seen["weights"] == ((32, 64), (4096, 32))
    assert seen["layouts"] == bench.LAYOUTS
    empty = invoke("bench", "--weights", "", "--json")
    assert empty.exit_code == 0 and seen.get("weights") == ()  # get: not narrowed above


def test_a_repeated_list_option_takes_every_occurrence(monkeypatch: pytest.MonkeyPatch) -> None:
    """click keeps the last of a repeated option; a list option takes them all, in order."""
    from quantgraph.bench import kernels as bench
    from quantgraph.cli.args.backend import BackendArgs

    seen: dict[str, object] = {}
    monkeypatch.setattr(bench, "run", lambda **kwargs: seen.update(kwargs) or [])
    result = invoke("bench", "--sizes", "64", "--sizes", "1024,2048", "--columns", "",
                    "--weights", "", "--weights", "32x64", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert seen["sizes"] == (64, 1024, 2048) and seen["weights"] == ((32, 64),)
    lists = BackendArgs(backends="native,python", fusions="none,auto").bench_lists()
    assert lists == (["native", "python"], ["none", "auto"])
    bad = invoke("bench", "--sizes", "64", "--sizes", "0")
    assert "0" in usage_error(bad, "--sizes")


# -- QUANTGRAPH_NATIVE_LIBRARY (item 10) ---------------------------------------------------------


def test_a_wrong_native_library_variable_is_an_error_not_a_fallback(
    models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUANTGRAPH_NATIVE_LIBRARY", "/nonexistent.so")
    line = one_line_error(invoke("run", models / "cnn_qg.onnx"))
    assert "QUANTGRAPH_NATIVE_LIBRARY='/nonexistent.so' is not a file" in line
    # An explicit other backend is still the user's choice.
    python = invoke("run", models / "cnn_qg.onnx", "--backend", "python")
    assert python.exit_code == 0, python.output


def test_a_wrong_native_library_variable_in_a_real_process(models: Path) -> None:
    env = {**os.environ, "QUANTGRAPH_NATIVE_LIBRARY": "/nonexistent.so"}
    done = subprocess.run(
        [sys.executable, "-m", "quantgraph", "run", str(models / "cnn_qg.onnx")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and "QUANTGRAPH_NATIVE_LIBRARY" in done.stderr


# -- --inputs files (item 8) --------------------------------------------------------------------


def _good(shape: tuple[int, ...] = CNN_SHAPE, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(dtype)


def _truncated_npz(path: Path) -> None:
    np.savez(path, input=_good())
    path.write_bytes(path.read_bytes()[:100])


BAD_FILES: dict[str, tuple[Callable[[Path], object], str]] = {
    "shape.npz": (
        lambda p: np.savez(p, input=_good((1, 3, 8, 8))),
        "input 'input' is float32[1,3,8,8]; the model expects float32[1,3,16,16] (dim 2 is 8, "
        "not 16)",
    ),
    "rank.npz": (
        lambda p: np.savez(p, input=_good((3, 16, 16))),
        "input 'input' is float32[3,16,16] (rank 3); the model expects rank 4 (float32[1,3,16,16])",
    ),
    "dtype.npz": (
        lambda p: np.savez(p, input=_good(dtype=np.float64)),
        "input 'input' is float64[1,3,16,16]; the model expects float32[1,3,16,16] (inputs are "
        "not converted)",
    ),
    "missing.npz": (
        lambda p: np.savez(p, x=_good()),
        "no array for input 'input' (the file holds x; the model's inputs: "
        "input: float32[1,3,16,16])",
    ),
    "extra.npz": (
        lambda p: np.savez(p, input=_good(), other=np.zeros(3)),
        "array 'other' names no input of the model (its inputs: input: float32[1,3,16,16])",
    ),
    "objects.npz": (
        lambda p: np.savez(p, input=np.array([{"a": 1}], dtype=object)),
        "array 'input' holds Python objects (dtype object); inputs must be arrays of numbers or "
        "booleans",
    ),
    "objects.npy": (
        lambda p: np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True),
        "array 'input' holds Python objects (dtype object)",
    ),
    "text.npz": (
        lambda p: p.write_text("hello"),
        "not an .npz or .npy file (inputs are numpy's formats: np.savez with one array per input "
        "name, or np.save for a model with one input)",
    ),
    "truncated.npz": (
        _truncated_npz,
        "cannot read inputs (",
    ),
}


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_wrong_inputs_file_says_what_is_wrong(
    models: Path, tmp_path: Path, command: str, name: str
) -> None:
    make, says = BAD_FILES[name]
    path = tmp_path / name
    make(path)
    models_args = [models / "cnn_qg.onnx"]
    if command == "validate":
        models_args.insert(0, models / "cnn.onnx")
    line = one_line_error(invoke(command, *models_args, "--inputs", path))
    assert line.startswith(f"{path}: ")
    assert says in line
    assert "--inputs" not in line  # it was given: the message is about the file
    assert "unsafe" not in line and "allow_pickle" not in line


def test_a_npy_feeds_a_one_input_model(models: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", _good())
    np.savez(tmp_path / "x.npz", input=_good())
    from_npy = invoke("run", models / "cnn_qg.onnx", "--inputs", tmp_path / "x.npy", "--json")
    from_npz = invoke("run", models / "cnn_qg.onnx", "--inputs", tmp_path / "x.npz", "--json")
    assert from_npy.exit_code == 0, from_npy.output
    assert json.loads(from_npy.stdout)["outputs"] == json.loads(from_npz.stdout)["outputs"]
    both = invoke(
        "validate", models / "cnn.onnx", models / "cnn_qg.onnx", "--inputs", tmp_path, "--json"
    )
    assert both.exit_code == 0, both.output
    assert json.loads(both.stdout)["samples"] == 2  # the directory's .npy and .npz


def test_a_npy_for_a_model_of_several_inputs_is_refused(tmp_path: Path) -> None:
    x = onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [2])
    y = onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [2])
    z = onnx.helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, [2])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["a", "b"], ["c"])], "g", [x, y], [z]
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    onnx.save(model, tmp_path / "add.onnx")
    np.save(tmp_path / "a.npy", np.ones(2, np.float32))
    line = one_line_error(invoke("run", tmp_path / "add.onnx", "--inputs", tmp_path / "a.npy"))
    assert line == (
        f"{tmp_path / 'a.npy'}: a .npy file holds one array, but the model has 2 inputs (a, b): "
        "pass an .npz with one array per input name (np.savez)"
    )
    with pytest.raises(ModelError, match=r"a \.npy file holds one unnamed array"):
        load_inputs(tmp_path / "a.npy")  # no model to name it


def test_an_empty_inputs_directory_is_refused(models: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no samples here")
    line = one_line_error(
        invoke("validate", models / "cnn.onnx", models / "cnn_qg.onnx", "--inputs", tmp_path)
    )
    assert line == f"{tmp_path}: the directory has no .npz or .npy files"


def test_run_inputs_takes_one_file(models: Path, tmp_path: Path) -> None:
    result = invoke("run", models / "cnn_qg.onnx", "--inputs", tmp_path)
    assert result.exit_code == 2
    assert "Invalid value for '--inputs'" in result.stderr and "is a directory" in result.stderr


def test_the_python_api_checks_a_mapping_against_the_model(models: Path) -> None:
    with pytest.raises(ModelError, match=r"inputs: input 'input' is float32\[1,3,8,8\]"):
        input_samples({"input": _good((1, 3, 8, 8))}, models / "cnn.onnx")
    with pytest.raises(ModelError, match="no array for input 'input'"):
        quantgraph.validate(models / "cnn.onnx", models / "cnn_qg.onnx", inputs={"x": _good()})


def test_an_original_failing_on_given_inputs_does_not_suggest_inputs(tmp_path: Path) -> None:
    """Inputs that fit the declared types but that the model refuses at run time (a Reshape to
    a size the file's symbolic dim does not have): onnxruntime's whole message, no hint to pass
    inputs that were passed."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n"])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    shape = onnx.helper.make_tensor("shape", onnx.TensorProto.INT64, [2], [2, 3])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Reshape", ["x", "shape"], ["y"])], "g", [x], [y], [shape]
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    onnx.save(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=np.ones(5, np.float32))
    line = one_line_error(
        invoke(
            "validate", tmp_path / "m.onnx", tmp_path / "m.onnx", "--inputs", tmp_path / "in.npz"
        )
    )
    assert line.startswith(
        f"{tmp_path / 'm.onnx'}: the original model fails on the inputs of {tmp_path / 'in.npz'} "
        "(x: float32[5]): "
    )
    assert "--inputs" not in line and "--dim" not in line


def test_inputs_fit_a_minus_one_dim(tmp_path: Path) -> None:
    """A dim declared -1 (Paddle2ONNX's PP-OCR classifier: [-1, 3, ?, ?]) takes any size."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [-1, 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [-1, 3])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    onnx.save(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=np.ones((4, 3), np.float32))
    result = invoke(
        "validate", tmp_path / "m.onnx", tmp_path / "m.onnx", "--inputs", tmp_path / "in.npz"
    )
    assert result.exit_code == 0, result.stderr


# -- two unrelated models (item 12) -------------------------------------------------------------


def test_unrelated_models_say_how_their_inputs_differ(models: Path, tmp_path: Path) -> None:
    line = one_line_error(invoke("validate", models / "cnn.onnx", models / "tr_qg.onnx"))
    assert line == (
        "the models' inputs differ, so the rewritten model is not a form of the original: input "
        f"'input' is float32[1,3,16,16] (rank 4) in {models / 'cnn.onnx'} but float32[?,8,32] "
        f"(rank 3) in {models / 'tr_qg.onnx'}"
    )
    assert "Invalid rank" not in line
    model = onnx.load(models / "cnn_qg.onnx")
    model.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    onnx.save(model, tmp_path / "f64.onnx")
    line = one_line_error(invoke("validate", models / "cnn.onnx", tmp_path / "f64.onnx"))
    assert "is float32[1,3,16,16] (rank 4) in" in line and "but float64[1,3,16,16]" in line
    model.graph.input[0].name = "image"
    for node in model.graph.node:
        node.input[:] = ["image" if name == "input" else name for name in node.input]
    onnx.save(model, tmp_path / "renamed.onnx")
    line = one_line_error(invoke("validate", models / "cnn.onnx", tmp_path / "renamed.onnx"))
    assert f"input 'input' (input: float32[1,3,16,16]) is only in {models / 'cnn.onnx'}" in line
    assert (
        f"input 'image' (image: float64[1,3,16,16]) is only in {tmp_path / 'renamed.onnx'}" in line
    )


def test_unrelated_models_fail_before_anything_runs(
    models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a session was made")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    with pytest.raises(ModelError, match="the models' inputs differ"):
        quantgraph.validate(models / "cnn.onnx", models / "tr_qg.onnx")


# -- --optimized (item 14) ----------------------------------------------------------------------


def _optimized_difference(args: list[str | Path]) -> float:
    payload = json.loads(invoke(*args, "--json").stdout)
    assert payload["optimized"]["part_of_verdict"] is False
    assert "not part of the verdict" in payload["optimized"]["comparison"]
    assert len(payload["comparison"]) < 100 and payload["comparison_note"]
    return max(float(o["max_abs_diff"]) for o in payload["optimized"]["outputs"])


def test_optimized_says_it_is_not_part_of_the_verdict(models: Path) -> None:
    """Both sides of the tolerance, whatever the CPU: the tolerance is set from the difference
    measured here (how large it is depends on the CPU, see the next test)."""
    args: list[str | Path] = [
        "validate",
        models / "cnn.onnx",
        models / "cnn_qg.onnx",
        "--optimized",
    ]
    difference = _optimized_difference(args)
    tolerances = [difference * 2 + 1e-6]
    if difference > 0:
        tolerances.append(difference / 2)
    for atol in tolerances:
        text = invoke(*args, "--atol", f"{atol:.3g}")
        assert text.exit_code == 0, text.output  # the optimized run never decides the verdict
        lines = text.stdout.splitlines()
        assert max(map(len, lines)) <= 100, lines
        assert any("BEYOND tolerance" in line for line in lines) == (atol < difference), lines
        assert any(line.startswith("informational, not part of the verdict:") for line in lines)
        assert lines[-1] == "verdict: the models agree (from the ORT_DISABLE_ALL comparison only)"


def test_optimized_difference_follows_the_cpu(models: Path) -> None:
    """onnxruntime's fused int8 kernels saturate u8 x s8 product pairs in int16 on x86 CPUs
    without VNNI (steps away from the unfused composition); with VNNI they sum in int32 and stay
    within float rounding (measured: within 1e-3 on an AVX-512 VNNI EPYC)."""
    args: list[str | Path] = [
        "validate",
        models / "cnn.onnx",
        models / "cnn_qg.onnx",
        "--optimized",
    ]
    difference = _optimized_difference(args)
    if cpu().int8_products_saturate:
        assert difference > 1e-3, (cpu().describe(), difference)
    else:
        assert difference <= 1e-3, (cpu().describe(), difference)


# -- convert's options (item 15) ----------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        ["--dim", "batch=2"],
        ["--val-range", "input:0,1"],
        ["--backend", "python"],
        ["--arithmetic", "onnx"],
        ["--iterations", "3"],
        ["--seed", "4"],
        ["--iterations", "1", "--seed", "0"],  # given, even at the default value
        ["--inputs", "{npz}"],
        ["--intermediate"],
        ["--optimized"],
        ["--atol", "0.1", "--rtol", "0.1"],
        ["--fusion", "onnxruntime"],
        ["--report", "{tmp}/page.html"],
    ],
    ids=lambda g: " ".join(g),
)
def test_convert_validation_options_need_validate(
    models: Path, tmp_path: Path, given: list[str]
) -> None:
    out = tmp_path / "o.onnx"
    np.savez(tmp_path / "in.npz", input=_good())
    given = [g.format(npz=tmp_path / "in.npz", tmp=tmp_path) for g in given]
    result = invoke("convert", models / "cnn.onnx", out, *given)
    assert result.exit_code == 2, result.output
    named = {g for g in given if g.startswith("--")}
    rule = f" {'applies' if len(named) == 1 else 'apply'} only with --validate"
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: ") and line.endswith(rule), line
    assert set(line.removeprefix("Error: ").removesuffix(rule).split(", ")) == named
    assert not out.exists() and not (tmp_path / "page.html").exists()


def test_convert_seed_and_dry_run_validate(models: Path, tmp_path: Path) -> None:
    """convert --validate takes --seed like validate; under --dry-run it validates the result
    in memory and writes nothing."""
    args: list[str | Path] = ["convert", models / "cnn.onnx", "--dry-run", "--validate", "--json"]
    first = invoke(*args, "--seed", "5", "--iterations", "2")
    assert first.exit_code == 0, first.output
    payload = json.loads(first.stdout)
    assert "output" not in payload
    assert payload["validation"]["seed"] == 5 and payload["validation"]["samples"] == 2
    assert payload["validation"]["agree"] is True
    assert list(tmp_path.iterdir()) == []
    same = invoke("validate", models / "cnn.onnx", models / "cnn_qg.onnx", "--seed", "5", "--json")
    assert json.loads(same.stdout)["inputs"] == payload["validation"]["inputs"]
    help_text = " ".join(invoke("convert", "--help").stdout.split())
    assert "--seed" in help_text and "with --validate: validate the result in memory" in help_text


def test_convert_dry_run_validate_with_external_weights(tmp_path: Path) -> None:
    model = onnx.load(CNN)
    onnx.save(
        model,
        tmp_path / "ext.onnx",
        save_as_external_data=True,
        location="ext.data",
        size_threshold=0,
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    result = invoke("convert", tmp_path / "ext.onnx", "--dry-run", "--validate")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "verdict: the models agree"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("command", ["run", "validate"])
def test_generation_options_with_inputs_are_usage_errors(
    models: Path, tmp_path: Path, command: str
) -> None:
    """--seed, --dim, --val-range (and validate's --iterations) shape generated inputs only:
    with --inputs they would be ignored, so they are refused."""
    np.savez(tmp_path / "in.npz", input=_good())
    targets = [models / "cnn_qg.onnx"]
    if command == "validate":
        targets.insert(0, models / "cnn.onnx")
    result = invoke(command, *targets, "--inputs", tmp_path / "in.npz", "--seed", "3")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: --seed applies only to generated inputs, not with --inputs"
    )
    both = invoke(
        command,
        *targets,
        "--inputs",
        tmp_path / "in.npz",
        "--dim",
        "a=1",
        "--val-range",
        "input:0,1",
    )
    assert both.stderr.strip().splitlines()[-1] == (
        "Error: --dim, --val-range apply only to generated inputs, not with --inputs"
    )


# -- --dim sizes (issue 32, item 4) -------------------------------------------------------------


def _dim_commands(models: Path, out: Path) -> dict[str, list[str | Path]]:
    """Each command that takes --dim, with the arguments it needs to read it."""
    return {
        "run": ["run", models / "cnn_qg.onnx"],
        "validate": ["validate", models / "cnn.onnx", models / "cnn_qg.onnx"],
        "convert": ["convert", models / "cnn.onnx", out, "--validate"],
        "bench": ["bench", "--model", models / "cnn.onnx", models / "cnn_qg.onnx"],
        "tune": ["tune", models / "cnn_qg.onnx"],
        "fallback": [
            "fallback",
            models / "cnn.onnx",
            models / "cnn.onnx",
            out,
            "--target-sqnr",
            "1",
        ],
    }


@pytest.mark.parametrize("value", ["batch=0", "input:0=-3", "input:2=0"])
def test_a_dim_size_below_one_is_a_usage_error_everywhere(
    models: Path, tmp_path: Path, value: str
) -> None:
    """A size of 0 made empty inputs (nothing compared, nothing timed) and a negative one
    numpy's error: both are refused as the command line is read, by every command."""
    commands = _dim_commands(models, tmp_path / "o.onnx")
    taking = {name for name, c in main.commands.items() if any(p.name == "dims" for p in c.params)}
    assert taking == set(commands)
    for args in commands.values():
        line = usage_error(invoke(*args, "--dim", value), "--dim")
        assert line.endswith(f"Invalid value for '--dim': '{value}': a size must be >= 1"), line
    assert not (tmp_path / "o.onnx").exists()


def test_the_api_refuses_a_dim_size_below_one(models: Path) -> None:
    from quantgraph.validation import InputOptionError, make_inputs

    with pytest.raises(InputOptionError, match=r"--dim: 'input:0=0': a size must be >= 1"):
        make_inputs(models / "cnn.onnx", dims={"input:0": 0})
