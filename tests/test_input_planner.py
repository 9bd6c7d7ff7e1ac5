"""One input planner for every command (issue 42, item 1 of "What must hold"): validate, run,
tune, bench and the API plan the same inputs for the same model and options; masks are 0s and
1s with a 1 in every row; a bucket table is not a position table; NaN or inf in the original
itself is the original's error, naming the inputs and the options that fix it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.ir.model_files import load_model
from quantgraph.validation import generate, make_inputs, plan_inputs
from quantgraph.validation.inputs.bounds import position_rows
from quantgraph.validation.inputs.plan import fed_inputs
from tests.builders import make_model, requires_native, tensor_info
from tests.t5_encoder import quantized, t5_encoder
from tests.test_validation_inputs import vad_quantized

F, I64, I32, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
QUICK_BENCH = ["--rounds", "1", "--repeat", "1", "--processes", "1", "--fusions", "none"]


def _quiet_quantize(model: onnx.ModelProto) -> onnx.ModelProto:
    root = logging.getLogger()  # quantize_dynamic warns on the root logger
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        return quantized(model)
    finally:
        root.setLevel(level)


def _pair(folder: Path, name: str, model: onnx.ModelProto) -> tuple[Path, Path]:
    original, rewritten = folder / f"{name}.onnx", folder / f"{name}_qg.onnx"
    onnx.save(model, original)
    quantgraph.convert(original).save(rewritten)
    return original, rewritten


@pytest.fixture(scope="module")
def t5(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The T5-like encoder (tests/t5_encoder.py) through quantize_dynamic, and its conversion."""
    folder = tmp_path_factory.mktemp("planner")
    return _pair(folder, "t5", _quiet_quantize(t5_encoder()))


def _cli(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _fresh(*args: object) -> tuple[int, str, str]:
    """The command in a process of its own: nothing registered or cached by earlier tests."""
    done = subprocess.run(
        [sys.executable, "-m", "quantgraph", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def _inputs_of(out: str) -> dict[str, dict[str, object]]:
    payload = json.loads(out)
    rows = payload if isinstance(payload, list) else [payload]
    found: dict[str, dict[str, object]] = rows[0]["inputs"]
    return found


# -- one planner ----------------------------------------------------------------------------------


def test_validate_run_tune_and_the_api_plan_alike(t5: tuple[Path, Path]) -> None:
    """Before: tune planned on the rewritten model before any session registered quantgraph's
    schemas, so shape inference stopped at the DynamicDequantize of the embedding table:
    input_ids drawn from [-100, 100] where run (after its session) drew [0, 99]."""
    original, rewritten = t5
    options = ("--seed", "3", "--dim", "sequence=24")
    code, out, err = _cli("validate", original, rewritten, "--json", *options)
    assert code in (0, 1), err  # the verdict is not this test's
    validated = _inputs_of(out)
    assert validated["input_ids"] == {
        "dtype": "int64",
        "shape": [1, 24],
        "range": [0, 99],
        "why": "indices of 'embed' (Gather), axis 0 of size 100",
        "shape_from": ["default 1", "--dim sequence=24"],
    }
    for command in (["run", rewritten], ["run", original], ["tune", rewritten, "--budget", "0.5"]):
        code, out, err = _fresh(*command, "--json", *options)
        assert code == 0, err
        assert _inputs_of(out) == validated, command
    api = generate(rewritten, seed=3, dims={"sequence": 24})
    assert (
        api.inputs == validated
        and generate(original, seed=3, dims={"sequence": 24}).inputs == api.inputs
    )
    for name, array in make_inputs(original, seed=3, dims={"sequence": 24}).items():
        np.testing.assert_array_equal(array, api.samples[0][name])


@requires_native
def test_bench_plans_as_validate_does(t5: tuple[Path, Path]) -> None:
    original, rewritten = t5
    code, out, err = _cli("validate", original, rewritten, "--json", "--seed", "2")
    assert code in (0, 1), err
    code, benched, err = _cli(
        "bench", "--model", original, rewritten, *QUICK_BENCH, "--seed", "2", "--json"
    )
    assert code == 0, err
    assert _inputs_of(benched) == _inputs_of(out)


def test_a_plan_the_search_found_is_the_plan_of_every_command(tmp_path: Path) -> None:
    """The first plan (audio [1, 1]) is refused by a reflect Pad: run and the API search as
    validate does (run used to stop at the first plan)."""
    original, rewritten = _pair(tmp_path, "vad", vad_quantized())
    code, out, err = _cli("validate", original, rewritten, "--json")
    assert code == 0, err
    validated = _inputs_of(out)
    assert validated["audio"]["shape"] == [1, 64]
    code, out, err = _cli("run", rewritten, "--json")
    assert code == 0, err
    assert _inputs_of(out) == validated
    assert generate(rewritten).inputs == validated
    assert make_inputs(original)["audio"].shape == (1, 64)


# -- masks --------------------------------------------------------------------------------------


def _attention(op: str, mask_index: int) -> onnx.NodeProto:
    inputs = ["q", "", "", "", "", "", "", "", ""][: max(mask_index + 1, 3)]
    inputs[mask_index] = "lengths"
    node = helper.make_node(op, inputs, ["att"], domain="com.microsoft")
    node.attribute.extend([helper.make_attribute(k, 1) for k in ("num_heads", "kv_num_heads")])
    return node


def mask_model() -> onnx.ModelProto:
    """Inputs that are masks by name or by use, and token ids compared with a padding id
    (not a mask). Planned, never run."""
    nodes = [
        helper.make_node("Where", ["keep", "x", "zero_f"], ["w1"], name="pick"),
        helper.make_node("Cast", ["valid"], ["valid_b"], name="to_bool", to=BOOL),
        helper.make_node("Where", ["valid_b", "w1", "zero_f"], ["w2"], name="pick_valid"),
        helper.make_node("Cast", ["padding_mask"], ["pm"], name="pm", to=F),
        helper.make_node("Add", ["w2", "pm"], ["w3"], name="add_pm"),
        helper.make_node("Equal", ["ids", "zero"], ["is_pad"], name="is_pad"),
        helper.make_node("Where", ["is_pad", "zero_f", "w3"], ["y"], name="unpad"),
        helper.make_node("ReduceSum", ["attn", "axis1"], ["total"], name="total", keepdims=1),
        helper.make_node("Sub", ["total", "one"], ["minus_one"], name="minus_one"),
        helper.make_node("Cast", ["minus_one"], ["lengths"], name="lengths", to=I32),
        _attention("GroupQueryAttention", 5),
    ]
    constants = [
        numpy_helper.from_array(np.array(0, np.float32), "zero_f"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    ]
    inputs = [
        tensor_info("x", F, [64, 3]),
        tensor_info("keep", BOOL, [64, 3]),
        tensor_info("valid", I64, [64, 3]),
        tensor_info("padding_mask", F, [64, 3]),
        tensor_info("ids", I64, [64, 3]),
        tensor_info("attn", I64, [64, 3]),
        tensor_info("q", F, [64, 1, 8]),
    ]
    outputs = [tensor_info("y", F, [64, 3]), tensor_info("att", F, [64, 1, 8])]
    return make_model(nodes, inputs, outputs, constants, domains={"com.microsoft": 1}, check=False)


def test_masks_by_name_and_by_use_are_zero_or_one_with_a_one_in_every_row() -> None:
    specs = {s.name: s for s in plan_inputs(load_model(mask_model()))}
    assert specs["keep"].why.startswith("a mask: the condition of 'pick' (Where)")
    assert specs["valid"].why.startswith("a mask: cast to bool by 'to_bool' (Cast)")
    assert specs["padding_mask"].why.startswith("a mask: named like one")
    assert specs["attn"].why.startswith(
        "a mask: read by GroupQueryAttention, through ReduceSum -> Sub -> Cast"
    )
    assert not specs["ids"].mask and (specs["ids"].low, specs["ids"].high) == (-100, 100)
    masks = [s for s in specs.values() if s.mask]
    assert {s.name for s in masks} == {"keep", "valid", "padding_mask", "attn"}
    assert all((s.low, s.high) == (0, 1) for s in masks)
    empty_rows = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        for _ in masks:
            raw = rng.integers(0, 1, (64, 3), endpoint=True)  # the same stream, before rows
            empty_rows += int((raw.sum(axis=-1) == 0).sum())
        rng = np.random.default_rng(seed)
        for spec in masks:
            drawn = spec.draw(rng)
            assert drawn.dtype == spec.dtype.numpy() and drawn.shape == (64, 3)
            assert set(np.unique(drawn.astype(np.int64))) <= {0, 1}
            assert drawn.astype(bool).any(axis=-1).all(), spec.name
    assert empty_rows > 100  # about one row in eight would have masked everything


def test_a_val_range_is_taken_as_given_for_a_mask() -> None:
    (spec,) = [
        s
        for s in plan_inputs(load_model(mask_model()), val_ranges={"valid": (-3, 3)})
        if s.name == "valid"
    ]
    assert not spec.mask and (spec.low, spec.high, spec.why) == (-3, 3, "--val-range")


def test_the_published_t5_encoder_runs_on_its_generated_mask(t5: tuple[Path, Path]) -> None:
    """Before: attention_mask drawn from [-100, 100]; (1 - 100) * float32 min is +inf and the
    original's softmax gave NaN, which validate blamed on the rewritten DynamicQuantize."""
    original, rewritten = t5
    report = quantgraph.validate(original, rewritten)
    mask = report.inputs["attention_mask"]
    assert mask["range"] == [0, 1] and str(mask["why"]).startswith("a mask: named like one")
    assert report.input_search is None
    hidden = make_inputs(original)
    import onnxruntime as ort

    (out,) = ort.InferenceSession(str(original)).run(None, hidden)
    assert np.isfinite(out).all()


# -- buckets are not positions ------------------------------------------------------------------


def test_a_bucket_table_does_not_cap_the_sequence(t5: tuple[Path, Path]) -> None:
    """T5's relative_attention_bias has 32 rows indexed by a bucket of the position difference
    (Abs, Log, Div, Min, Where): it used to cap the sequence at 32."""
    original, rewritten = t5
    for path in (original, rewritten):
        model = load_model(path)
        assert position_rows(model, fed_inputs(model)) is None
        specs = {s.name: s for s in plan_inputs(model)}
        assert specs["input_ids"].shape == (1, 128)
        assert specs["input_ids"].shape_from[1] == "sequence default 128"


def test_a_position_table_still_caps_the_sequence() -> None:
    """The same 32-row table read at Range positions (plus an offset, through a Cast) is a
    position table: sequences stop at 32."""
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "one"], ["seq"], name="seq", axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["positions"], name="positions"),
        helper.make_node("Add", ["positions", "zero"], ["shifted"], name="shifted"),
        helper.make_node("Cast", ["shifted"], ["as_int"], name="as_int", to=I64),
        helper.make_node("Gather", ["table", "as_int"], ["y"], name="position_embedding"),
    ]
    constants = [
        numpy_helper.from_array(np.zeros((32, 4), np.float32), "table"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
    ]
    model = load_model(
        make_model(
            nodes,
            [tensor_info("input_ids", I64, ["batch", "sequence"])],
            [tensor_info("y", F, ["sequence", 4])],
            constants,
        )
    )
    assert position_rows(model, fed_inputs(model)) == (32, "'position_embedding' (Gather)")
    (spec,) = plan_inputs(model)
    assert spec.shape == (1, 32) and "at most 32" in spec.shape_from[1]


# -- NaN or inf in the original -----------------------------------------------------------------


def _one_line_blaming_the_original(err: str, who: str = "the original model itself") -> str:
    (line,) = err.strip().splitlines()
    assert who in line and "DynamicQuantize" not in line and "rewritten" not in line, line
    return line


def test_nan_in_the_original_is_its_error_naming_the_input_and_the_fix(
    t5: tuple[Path, Path], tmp_path: Path
) -> None:
    """The published T5's situation forced with --val-range: attention_mask in [-100, 100].
    Before: validate, convert --validate and tune exited 2 with "DynamicQuantize node
    'merged_QuantizeLinear': scales[0] = nan"."""
    original, rewritten = t5
    forced = ("--val-range", "attention_mask:-100,100")
    code, _, err = _cli("validate", original, rewritten, *forced)
    assert code == 2
    line = _one_line_blaming_the_original(err)
    assert "gives NaN in output 'hidden'" in line and "first in tensor 'probs'" in line
    assert "node 'extended' (Mul) makes inf and -inf of finite values" in line
    assert "reading input 'attention_mask' (drawn from [-100, 100]: --val-range)" in line
    assert line.endswith(
        "set their values with --val-range attention_mask:LOW,HIGH, or pass inputs with "
        "--inputs FILE"
    )
    assert "'input_ids'" not in line.split("makes")[1]  # its values are inside the table
    code, _, err = _cli("convert", original, tmp_path / "out.onnx", "--validate", *forced)
    assert code == 2
    converted = _one_line_blaming_the_original(err)
    said = line.removeprefix("quantgraph: error: ")
    assert said in converted and converted.endswith("is kept")  # OUT was written, as ever
    code, _, err = _fresh("tune", rewritten, "--budget", "0.5", *forced)
    assert code == 2
    tuned = _one_line_blaming_the_original(err, "the model's original form")
    assert "reading input 'attention_mask'" in tuned


def log_masked_encoder() -> onnx.ModelProto:
    """The T5-like encoder whose mask input, named 'keep' (no mask by name or use), adds
    log(keep) to the scores: 0 masks a position, a negative value is NaN."""
    return _quiet_quantize(t5_encoder(mask_use="log", mask_name="keep"))


def test_nan_for_negative_mask_values_is_a_refusal_the_search_avoids(tmp_path: Path) -> None:
    original, rewritten = _pair(tmp_path, "log_mask", log_masked_encoder())
    report = quantgraph.validate(original, rewritten)
    search = report.input_search
    assert search is not None and search.plan == "integers in [0, 100]"
    assert search.first_error.startswith("NaN in output 'hidden' (")
    assert report.inputs["keep"]["range"] == [0, 100]
    # tune runs the rewritten model, whose DynamicQuantize refuses the NaN: the same search
    code, out, err = _fresh("tune", rewritten, "--json", "--budget", "0.5")
    assert code == 0, err
    assert _inputs_of(out) == report.inputs
    code, _, err = _cli("validate", original, rewritten, "--val-range", "keep:-1,1")
    assert code == 2
    line = _one_line_blaming_the_original(err)
    assert "node 'log_mask' (Log) makes NaN of finite values" in line
    assert "reading input 'keep' (drawn from [-1, 1]: --val-range)" in line


def nan_inside_model() -> onnx.ModelProto:
    """log(x - 10) -> MatMul (quantize_dynamic: DynamicQuantizeLinear + MatMulInteger), its NaN
    then replaced by 0: the original's output is finite, the rewritten DynamicQuantize refuses
    the NaN scale (a standard normal x is below 10)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Sub", ["x", "ten"], ["shifted"], name="shift"),
        helper.make_node("Log", ["shifted"], ["logx"], name="log"),
        helper.make_node("MatMul", ["logx", "w"], ["mm"], name="mm"),
        helper.make_node("IsNaN", ["mm"], ["nan"], name="isnan"),
        helper.make_node("Where", ["nan", "zero", "mm"], ["y"], name="clean"),
    ]
    constants = [
        numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(0, np.float32), "zero"),
        numpy_helper.from_array(np.array(10, np.float32), "ten"),
    ]
    model = make_model(
        nodes, [tensor_info("x", F, ["batch", 8])], [tensor_info("y", F, ["batch", 8])], constants
    )
    return _quiet_quantize(model)


def test_a_rewritten_run_stopped_by_the_originals_nan_is_the_originals_error(
    tmp_path: Path,
) -> None:
    original, rewritten = _pair(tmp_path, "nan_inside", nan_inside_model())
    code, _, err = _cli("validate", original, rewritten)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "the original model itself computes NaN (8 of 8 values) in tensor 'logx'" in line
    assert "node 'log' (Log) makes NaN of finite values" in line
    assert "reading input 'x' (standard normal)" in line
    assert "the rewritten model stops on the same values" in line
    assert line.endswith(
        "set their values with --val-range x:LOW,HIGH, or pass inputs with --inputs FILE"
    )
    code, _, err = _cli("validate", original, rewritten, "--val-range", "x:11,20")
    assert code in (0, 1), err


@pytest.mark.parametrize(("op", "index"), [("Attention", 3), ("MultiHeadAttention", 4)])
def test_an_attention_ops_mask_input_is_a_mask(op: str, index: int) -> None:
    nodes = [
        helper.make_node("Cast", ["m"], ["lengths"], name="as_int32", to=I32),
        _attention(op, index),
    ]
    model = make_model(
        nodes,
        [tensor_info("q", F, [2, 1, 8]), tensor_info("m", I64, [2, 5])],
        [tensor_info("att", F, [2, 1, 8])],
        domains={"com.microsoft": 1},
        check=False,
    )
    (_, spec) = plan_inputs(load_model(model))
    assert spec.mask and spec.why.startswith(f"a mask: read by {op}, through Cast")


def write_models(folder: str | Path) -> dict[str, Path]:
    """docs/robustness.md's models, each beside its conversion (``<name>_qg.onnx``):
    ``python -c 'from tests import test_input_planner as t; t.write_models("scratch")'``."""
    from tools.decoders import TINY, decoder_proto

    Path(folder).mkdir(parents=True, exist_ok=True)
    made = {
        "t5": _quiet_quantize(t5_encoder()),
        "log_mask": log_masked_encoder(),
        "nan_inside": nan_inside_model(),
        "decoder": decoder_proto(TINY),
    }
    return {name: _pair(Path(folder), name, model)[0] for name, model in made.items()}
