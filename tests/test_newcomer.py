"""Issue #32, a newcomer's first hour: a float model refused with advice, a converted one
recognised, swapped validate arguments, report paths checked before any work, the package's
help, force's spelling in Python, ValidationReport.write_html, grouped skip reasons, what
``run`` generated, ``inspect --backend`` lines and ``bench``'s rows as they come."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import TensorProto, helper

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError, NoQuantization
from tests.builders import make_model, tensor_info

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
FLOAT = MODELS / "cnn_float.onnx"
CNN = MODELS / "cnn_u8.onnx"


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_error(result: Result) -> str:
    """The one stderr line of a refusal (exit 2), without its prefix."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("quantgraph: error: "), lines[0]
    return lines[0].removeprefix("quantgraph: error: ")


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    path = tmp_path / "cnn_qg.onnx"
    quantgraph.convert(CNN).save(path)
    return path


# -- 1. a float model ----------------------------------------------------------------------------


def test_converting_a_float_model_is_refused_with_what_it_holds(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    message = one_error(invoke("convert", FLOAT, out))
    assert message == (
        f"{FLOAT}: the model holds no quantization (no QuantizeLinear/DequantizeLinear nor any "
        "other quantized node; it holds 2 Conv, 2 Relu, 1 Flatten, 1 Gemm, 1 GlobalAveragePool, "
        "1 MaxPool): quantize it first, e.g. onnxruntime.quantization.quantize_static(..., "
        "quant_format=QuantFormat.QDQ), then convert the result"
    )
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary left
    assert "holds no quantization" in one_error(invoke("inspect", FLOAT))


def test_the_api_raises_no_quantization_a_model_error() -> None:
    with pytest.raises(NoQuantization, match="holds no quantization") as caught:
        quantgraph.convert(FLOAT)
    assert isinstance(caught.value, ModelError)
    model = onnx.load(FLOAT)  # no file: no file name either
    with pytest.raises(NoQuantization, match=r"^the model holds no quantization"):
        quantgraph.convert(model)


def test_a_float_model_with_many_op_types_names_the_most_frequent() -> None:
    names = ["Relu", "Relu", "Relu", "Abs", "Abs", "Neg", "Exp", "Log", "Sigmoid", "Tanh"]
    values = ["x", *[f"v{i}" for i in range(len(names))]]
    nodes = [helper.make_node(op, [values[i]], [values[i + 1]]) for i, op in enumerate(names)]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, [2])],
        [tensor_info(values[-1], TensorProto.FLOAT, [2])],
    )
    with pytest.raises(NoQuantization) as caught:
        quantgraph.convert(model)
    assert "it holds 3 Relu, 2 Abs, 1 Exp, 1 Log, 1 Neg, 1 Sigmoid, ...)" in str(caught.value)


def test_a_converted_model_converts_again_saying_it_is_already_converted(
    converted: Path, tmp_path: Path
) -> None:
    result = invoke("convert", converted, tmp_path / "again.onnx")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "already converted: 17 spec ops (10 DynamicDequantize, 7 DynamicQuantize), "
        "nothing left to rewrite"
    )


def test_other_quantized_formats_alone_are_not_called_float() -> None:
    """A model of integer kernels only (a MatMulInteger without quantize_dynamic's scale chain)
    keeps its report: the node is skipped with its reason, not called float."""
    b = np.ones((2, 2), np.uint8)
    model = make_model(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"], name="mm")],
        [tensor_info("a", TensorProto.UINT8, [2, 2])],
        [tensor_info("y", TensorProto.INT32, [2, 2])],
        [onnx.numpy_helper.from_array(b, "b")],
    )
    report = quantgraph.convert(model).report
    assert [(n.node, n.code) for n in report.skipped] == [("mm", "scale-chain")]
    assert report.converted == {}


# -- 4. validate's arguments swapped ------------------------------------------------------------


def test_swapped_validate_arguments_are_named_before_anything_runs(converted: Path) -> None:
    message = one_error(invoke("validate", converted, CNN))
    assert message == (
        f"ORIGINAL ({converted}, the first argument) holds quantgraph spec ops "
        f"(10 DynamicDequantize, 7 DynamicQuantize) and REWRITTEN ({CNN}) holds Q/DQ: the "
        f"arguments look swapped: quantgraph validate {CNN} {converted}"
    )
    with pytest.raises(ModelError, match="the arguments look swapped"):
        quantgraph.validate(converted, CNN, progress=_no_session)


def test_an_original_holding_spec_ops_is_refused_as_such(converted: Path) -> None:
    message = one_error(invoke("validate", converted, converted))
    assert message.endswith(
        "which plain onnxruntime cannot run: ORIGINAL is the model before conversion "
        "(quantgraph validate ORIGINAL REWRITTEN)"
    )


def test_a_float_original_against_its_qdq_form_still_validates() -> None:
    result = invoke("validate", FLOAT, CNN, "--atol", "1")
    assert result.exit_code == 0, result.output
    assert "verdict: the models agree" in result.stdout


def _no_session(stage: str, done: int, total: int) -> None:
    raise AssertionError(f"validate reached {stage} before refusing the arguments")


# -- 3. output paths checked before any work ----------------------------------------------------


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("the command worked before checking its output paths")


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation and conversion fail the test if reached."""
    monkeypatch.setattr("quantgraph.validation.validate", _never)
    monkeypatch.setattr("quantgraph.converter.convert", _never)


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("command", ["validate", "convert"])
def test_a_bad_report_path_is_refused_before_any_work(tmp_path: Path, command: str) -> None:
    existing = tmp_path / "page.html"
    existing.write_text("keep me")
    (tmp_path / "folder.html").mkdir()
    (tmp_path / "file").write_text("")
    args = [CNN, tmp_path / "out.onnx", "--validate"] if command == "convert" else [CNN, CNN]
    cases = {
        existing: f"{existing}: already exists (use --force to replace it)",
        CNN: f"{CNN}: --report is an input file; quantgraph never writes over its input",
        tmp_path / "file" / "page.html": f"{tmp_path / 'file' / 'page.html'}: cannot write "
        "--report (Not a directory)",
    }
    for report, message in cases.items():
        assert one_error(invoke(command, *args, "--report", report)) == message
    folder = invoke(command, *args, "--report", tmp_path / "folder.html")  # click's own check
    assert folder.exit_code == 2 and "is a directory" in folder.stderr, folder.stderr
    assert existing.read_text() == "keep me"
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.usefixtures("no_work")
def test_convert_refuses_a_report_named_as_out(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    message = one_error(invoke("convert", CNN, out, "--validate", "--report", out))
    assert message == f"{out}: --report is OUT; give the page a name of its own"


@pytest.mark.usefixtures("no_work")
def test_a_folder_without_write_permission_is_refused_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root every folder is writable: the permission itself is simulated.
    real = os.access

    def access(path: str | os.PathLike[str], mode: int, **kwargs: object) -> bool:
        return Path(path) != tmp_path and real(path, mode)

    monkeypatch.setattr(os, "access", access)
    page = tmp_path / "new" / "page.html"
    message = one_error(invoke("validate", CNN, CNN, "--report", page))
    assert message == f"{page}: cannot write --report (no permission to write in {tmp_path})"
    message = one_error(invoke("convert", CNN, tmp_path / "out.onnx"))
    assert message.endswith(f"cannot write OUT (no permission to write in {tmp_path})")


# -- 5. the package's help ----------------------------------------------------------------------

PUBLIC = ["DOMAIN", "OPSET_VERSION", "InferenceSession", "convert", "lower", "session_options"]


def test_dir_and_all_list_the_public_api() -> None:
    public = {*PUBLIC, "validate", "fallback"}
    assert public <= set(dir(quantgraph))
    assert set(quantgraph.__all__) == public
    doc = quantgraph.__doc__ or ""
    for name in public:  # each once, on a line of its own
        assert sum(line.startswith(f"* ``{name}") for line in doc.splitlines()) == 1, name


def test_help_shows_the_public_functions_and_classes() -> None:
    import pydoc

    text = pydoc.plain(pydoc.render_doc(quantgraph))
    functions = text[text.index("\nFUNCTIONS\n") :]
    for name in ("convert", "validate", "lower", "session_options"):
        assert f"\n    {name}(" in functions, name
    classes = text[text.index("\nCLASSES\n") : text.index("\nFUNCTIONS\n")]
    assert "class InferenceSession" in classes


def test_importing_the_package_and_listing_it_stay_light() -> None:
    """dir() lists the lazy names without importing them (numpy, onnx, onnxruntime)."""
    code = (
        "import sys, quantgraph; names = dir(quantgraph); "
        "heavy = [m for m in ('numpy', 'onnx', 'onnxruntime') if m in sys.modules]; "
        "print(heavy, 'convert' in names)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.strip() == "[] True", done.stderr


# -- 6. force's spelling ------------------------------------------------------------------------


def test_python_errors_say_force_true_and_the_command_line_says_force(tmp_path: Path) -> None:
    out = tmp_path / "o.onnx"
    out.write_text("keep me")
    result = quantgraph.convert(CNN)
    with pytest.raises(ModelError) as caught:
        result.save(out)
    assert str(caught.value) == f"{out}: already exists (use force=True to replace it)"
    out.chmod(0o444)
    with pytest.raises(ModelError, match="read-only; force=True does not replace"):
        result.save(out, force=True)
    line = one_error(invoke("convert", CNN, out, "--force"))
    assert "read-only; --force does not replace" in line
    out.chmod(0o644)
    assert one_error(invoke("convert", CNN, out)).endswith("(use --force to replace it)")
    with pytest.raises(ModelError, match=r"use force=True to replace it\)$"):
        result.save(out)  # the command line's spelling does not outlive its command


# -- 7. ValidationReport.write_html --------------------------------------------------------------


def test_write_html_writes_the_page_the_command_line_writes(
    converted: Path, tmp_path: Path
) -> None:
    cli_page, api_page = tmp_path / "cli.html", tmp_path / "api.html"
    result = invoke("validate", CNN, converted, "--intermediate", "--report", cli_page)
    assert result.exit_code == 0, result.output
    report = quantgraph.validate(CNN, converted, intermediate=True)
    assert report.write_html(api_page) == api_page
    assert api_page.read_bytes() == cli_page.read_bytes()
    assert f"<td>{converted}</td>" in api_page.read_text()
    with pytest.raises(ModelError, match=r"already exists \(use force=True to replace it\)"):
        report.write_html(cli_page)
    report.write_html(cli_page, force=True)
    with pytest.raises(ModelError, match="is an input file"):
        report.write_html(converted, force=True)


# -- 2. skip reasons grouped --------------------------------------------------------------------


def _biases(path: Path, count: int) -> Path:
    """``count`` DequantizeLinear of int32 constants (biases), which the spec leaves alone."""
    nodes, constants, outputs = [], [], []
    for i in range(count):
        constants += [
            onnx.numpy_helper.from_array(np.arange(4, dtype=np.int32), f"b{i}"),
            onnx.numpy_helper.from_array(np.array(0.5, np.float32), f"s{i}"),
        ]
        nodes.append(helper.make_node("DequantizeLinear", [f"b{i}", f"s{i}"], [f"y{i}"], f"dq{i}"))
        outputs.append(tensor_info(f"y{i}", TensorProto.FLOAT, [4]))
    onnx.save(make_model(nodes, [], outputs, constants), path)
    return path


def test_skips_are_grouped_by_reason_with_a_few_names(tmp_path: Path) -> None:
    model = _biases(tmp_path / "biases.onnx", 5)
    text = invoke("inspect", model)
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    start = lines.index("left unchanged 5 node(s), 1 reason(s):")
    reason = lines[start + 1]
    assert reason.startswith("  5 x DequantizeLinear: int32 input (a bias): "), reason
    assert lines[start + 2] == "      dq0, dq1, dq2, ... (2 more; --verbose lists all)"
    assert len(lines) == start + 3
    verbose = invoke("inspect", model, "--verbose").stdout.splitlines()
    assert verbose[start : start + 3] == [lines[start], reason, "      dq0, dq1, dq2, dq3, dq4"]
    again = invoke("convert", model, tmp_path / "o.onnx", "-v").stdout.splitlines()
    assert again[start : start + 3] == verbose[start : start + 3]
    payload = json.loads(invoke("inspect", model, "--json", "--verbose").stdout)
    assert [s["node"] for s in payload["skipped"]] == [f"dq{i}" for i in range(5)]


# -- 8. what run generated ----------------------------------------------------------------------


def test_run_says_which_inputs_it_generated(converted: Path, tmp_path: Path) -> None:
    result = invoke("run", converted, "--seed", "3")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "generated input 'input' (seed 3): float32[1,3,16,16], standard normal"
    ]
    payload = json.loads(invoke("run", converted, "--seed", "3", "--json").stdout)
    assert payload["seed"] == 3
    assert payload["inputs"] == {
        "input": {
            "dtype": "float32",
            "shape": [1, 3, 16, 16],
            "range": None,
            "why": "standard normal",
            "shape_from": ["model"] * 4,
        }
    }
    np.savez(tmp_path / "in.npz", input=np.zeros((1, 3, 16, 16), np.float32))
    given = invoke("run", converted, "--inputs", tmp_path / "in.npz", "--json")
    assert given.stderr == ""
    assert json.loads(given.stdout)["inputs"]["input"]["from"] == "--inputs"
    assert json.loads(given.stdout)["seed"] is None


def test_run_names_where_open_sizes_came_from(tmp_path: Path) -> None:
    model = tmp_path / "tr_qg.onnx"
    quantgraph.convert(MODELS / "transformer_s8.onnx").save(model)
    result = invoke("run", model, "--dim", "batch=2")
    assert result.stderr.splitlines() == [
        "generated input 'input' (seed 0): float32[2,8,32], standard normal; "
        "sizes: axis 0 = 2 (--dim batch=2)"
    ]


# -- 9. inspect --backend names each node once ---------------------------------------------------


def test_inspect_backend_names_each_refused_node_once(tmp_path: Path) -> None:
    from tests.test_weight_only import quantized

    model = tmp_path / "int4.onnx"
    onnx.save(quantized(True, 32), model)  # 4-bit weights: the python backend refuses both
    result = invoke("inspect", model, "--backend", "python")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("backend python: 0 nodes run, 2 refused, 0 unknown")
    for line, name in zip(lines[start + 1 : start + 3], ["mm1_DQ_Q4", "mm2_DQ_Q4"], strict=True):
        assert line.startswith("  refused: python backend: DynamicDequantize node "), line
        assert line.count(name) == 1, line


def test_a_reason_without_the_node_gets_it_once() -> None:
    from quantgraph.cli.render_text import print_support
    from quantgraph.runtime.support import NodeSupport

    @click.command()
    def show() -> None:
        print_support("onednn", None, [NodeSupport("n1", "Quantize", "unknown", "no shape")])

    result = CliRunner().invoke(show, [])
    assert result.stdout.splitlines()[1] == "  unknown: Quantize node 'n1': no shape"


# -- 10. bench prints rows as they are measured -------------------------------------------------


def test_kernel_bench_prints_each_row_as_it_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    from quantgraph.bench.timing import measure

    events: list[str] = []
    echo = click.echo

    def measured(*args: object, **kwargs: object) -> object:
        events.append("measure")
        return measure(*args, **kwargs)  # type: ignore[arg-type]

    def echoed(message: object = None, *args: object, **kwargs: object) -> None:
        events.append("row" if str(message).startswith("| ") else "text")
        echo(message, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("quantgraph.bench.kernels.measure", measured)
    monkeypatch.setattr(click, "echo", echoed)
    result = invoke("bench", "--sizes", "16", "--repeat", "1", "--columns", "", "--weights", "")
    assert result.exit_code == 0, result.output
    assert events[0] == "text"  # the environment line and the header, before any timing
    rows = [i for i, event in enumerate(events) if event == "row"]
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 6 == len(table) - 1  # 2 ops x 3 layouts, below the header
    for before, after in itertools.pairwise(rows):
        assert "measure" in events[before:after]  # each row printed before the next is timed
