"""Validation out of the box is bounded: every plan of generated inputs is estimated from its
shapes before it runs, none over --memory-budget runs, attempts go smallest first, the search
stops at --search-timeout, and the report says what was tried; sequence-like dims default to
128 (capped by a position table, shrunk under the budget)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.cli.args import inputs as input_args
from quantgraph.errors import ModelError
from quantgraph.ir.model_files import load_model
from quantgraph.schemas_json import schema
from quantgraph.validation import plan_inputs
from quantgraph.validation.inputs import memory, search
from quantgraph.validation.options import parse_size
from tests.builders import make_model, tensor_info
from tests.test_validation_inputs import RNG, quantize_static

F, I64 = TensorProto.FLOAT, TensorProto.INT64
HEIGHT = 48  # the only height the recognizer takes


def recognizer() -> onnx.ModelProto:
    """A text recognizer on x [?, 3, ?, ?] (PaddleOCR's rec): Conv, mean over the width, then a
    MatMul whose K is the height: only height 48 runs, 224 (the first plan) does not."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("ReduceMean", ["c", "axes"], ["r"], name="over_width", keepdims=0),
        helper.make_node("MatMul", ["r", "proj"], ["y"], name="by_height"),
    ]
    initializers = [
        numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([3], np.int64), "axes"),
        numpy_helper.from_array(RNG.standard_normal((HEIGHT, 8)).astype(np.float32), "proj"),
    ]
    return make_model(
        nodes,
        [tensor_info("x", F, [-1, 3, None, None])],
        [tensor_info("y", F, [None, 4, 8])],
        initializers,
    )


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("budget")
    sample = {"x": RNG.standard_normal((1, 3, HEIGHT, 64)).astype(np.float32)}
    original, rewritten = folder / "rec.onnx", folder / "rec_qg.onnx"
    onnx.save(quantize_static(recognizer(), [sample]), str(original))
    quantgraph.convert(original).save(rewritten)
    return original, rewritten


def _estimate(model: ir.Model, shape: tuple[int, ...]) -> int:
    """What the plan needs beside the weights (the budget's measure: weights are held anyway)."""
    found = memory.estimate(model, {"x": shape})
    return found.total - found.weights


class Recorder:
    """The original run on feeds, recording each plan's shapes (what actually ran)."""

    def __init__(self, path: Path) -> None:
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        self.shapes.append(feeds["x"].shape)
        return list(self.session.run(None, dict(feeds)))


def _find(path: Path, run: Recorder, **options: object) -> search.Found:
    return search.find_plan(
        load_model(path),
        run,
        label=str(path),
        message=str,
        **options,  # type: ignore[arg-type]
    )


def test_the_search_goes_smallest_first_and_finds_the_height(rec: tuple[Path, Path]) -> None:
    """Before: 256, 320, ... 640 were tried first (a real recognizer peaked at 19 GB)."""
    original, rewritten = rec
    report = quantgraph.validate(original, rewritten, backend="python")
    assert report.agree and report.inputs["x"]["shape"] == [1, 3, HEIGHT, HEIGHT]
    found = report.input_search
    assert found is not None and found.plan == f"image size {HEIGHT}"
    tried = [(t.number, t.plan, t.status) for t in found.tried]
    assert tried == [
        (0, "first plan", "failed"),
        (1, "image size 32", "failed"),
        (2, "image size 48", "ran"),
    ]
    estimates = [t.estimate or 0 for t in found.tried[1:]]
    assert estimates == sorted(estimates) and found.tried[0].estimate
    assert report.memory is not None and report.memory.estimate == found.tried[-1].estimate
    assert report.memory.budget == 2 << 30 and report.memory.unresolved == 0
    result = CliRunner().invoke(main, ["validate", str(original), str(rewritten), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema("validate")).validate(payload)
    assert [t["status"] for t in payload["input_search"]["tried"]] == ["failed", "failed", "ran"]
    text = CliRunner().invoke(main, ["validate", str(original), str(rewritten)]).stdout
    assert "tried, smallest estimated memory first:" in text
    assert "    2 image size 48: " in text and ", ran" in text
    assert "memory: estimated " in text and "--memory-budget 2 GiB" in text
    assert "defaulted: x:0 = 1 (default 1)" in text


def test_no_plan_over_the_budget_runs(rec: tuple[Path, Path]) -> None:
    """A budget under height 48's estimate: 48 and everything larger is skipped, not run."""
    original, _ = rec
    model = load_model(original)
    budget = _estimate(model, (1, 3, HEIGHT, HEIGHT)) - 1
    run = Recorder(original)
    with pytest.raises(ModelError) as raised:
        _find(original, run, memory_budget=budget)
    assert run.shapes and all(_estimate(model, shape) <= budget for shape in run.shapes)
    assert (1, 3, 32, 32) in run.shapes and (1, 3, 224, 224) not in run.shapes
    message = str(raised.value)
    assert "over --memory-budget" in message and "(the smallest, image size 48," in message
    assert "raise --memory-budget" in message


def test_a_first_plan_over_the_budget_is_not_run_and_a_smaller_one_is(
    rec: tuple[Path, Path],
) -> None:
    original, _ = rec
    model = load_model(original)
    budget = _estimate(model, (1, 3, 64, 64))  # 224 is over it, 48 is not
    assert _estimate(model, (1, 3, 224, 224)) > budget
    run = Recorder(original)
    found = _find(original, run, memory_budget=budget)
    assert run.shapes == [(1, 3, 64, 64), (1, 3, HEIGHT, HEIGHT)]  # shrinking: largest first
    assert found.search is not None and found.search.tried[0].status == "over budget"
    assert found.search.first_error.startswith("estimated to need ")
    statuses = {t.plan: t.status for t in found.search.tried}
    assert statuses["image size 48"] == "ran"


def test_the_search_stops_at_its_timeout() -> None:
    """A clock that moves 10 s a reading: with a 25 s timeout, later attempts are not reached."""
    model = recognizer()
    readings = iter(range(0, 10_000, 10))
    tried: list[tuple[int, ...]] = []

    def refuse(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        tried.append(feeds["x"].shape)
        raise RuntimeError("no")

    with pytest.raises(ModelError) as raised:
        search.find_plan(
            ir.from_proto(model),
            refuse,
            label="rec",
            message=str,
            timeout=25,
            clock=lambda: float(next(readings)),
        )
    assert "not tried: the search stops after --search-timeout 25 s" in str(raised.value)
    assert 1 <= len(tried) <= 3


def test_an_unknown_size_is_not_counted_as_nothing() -> None:
    """A custom op's output (shape inference cannot size it) counts as its largest input."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Mystery", ["r"], ["m"], domain="custom"),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", F, ["n", 1000])],
        [tensor_info("y", F, None)],
        domains={"custom": 1},
        check=False,
    )
    found = memory.estimate(ir.from_proto(model), {"x": (10, 1000)})
    assert found.unresolved == 2  # m, and y computed from it
    assert found.total >= 40_000 + memory.SCRATCH_FACTOR * 2 * 40_000


def test_a_weight_never_stands_in_for_an_unknown_size() -> None:
    """A custom op reading an activation and a dequantized weight (a converted model's MatMul
    behind a custom op): its output of unknown size counts as the activation, not as the 4 MB
    weight; the weight's float copy counts while it is alive."""
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"]),
        helper.make_node("Mystery", ["x", "w"], ["m"], domain="custom"),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.ones((1000, 1000), np.uint8), "wq"),
        numpy_helper.from_array(np.array(0.5, np.float32), "s"),
        numpy_helper.from_array(np.array(1, np.uint8), "z"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", F, ["n", 100])],
        [tensor_info("y", F, None)],
        initializers,
        domains={"custom": 1},
        check=False,
    )
    found = memory.estimate(ir.from_proto(model), {"x": (10, 100)})
    assert found.unresolved == 2
    weights, fed, float_weight = 1_000_000 + 4 + 1, 4000, 4_000_000
    assert found.weights == weights
    assert found.total == weights + fed + memory.SCRATCH_FACTOR * (float_weight + fed)


def test_the_peak_frees_dead_tensors_unless_all_are_kept() -> None:
    """A chain of four Relus on 4 KB: at most two tensors are alive at once; --intermediate
    keeps all four."""
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(4)]
    model = ir.from_proto(
        make_model(nodes, [tensor_info("t0", F, [1000])], [tensor_info("t4", F, [1000])])
    )
    assert memory.estimate(model, {"t0": (1000,)}).total == 4000 + 2 * 8000
    assert memory.estimate(model, {"t0": (1000,)}, keep_all=True).total == 4000 + 2 * 16000


# -- sequence defaults ------------------------------------------------------------------------


def token_model(rows: int = 512, seq: str | None = "sequence") -> onnx.ModelProto:
    """input_ids and attention_mask [batch, seq] into a word table and a position table of
    ``rows`` gathered at Range(0, seq)."""
    nodes = [
        helper.make_node("Gather", ["words", "input_ids"], ["w"], name="word"),
        helper.make_node("Shape", ["input_ids"], ["s"], start=1, end=2),
        helper.make_node("Squeeze", ["s"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["p"]),
        helper.make_node("Gather", ["positions", "p"], ["pe"], name="pos"),
        helper.make_node("Add", ["w", "pe"], ["e"]),
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=F),
        helper.make_node("Unsqueeze", ["mf", "last"], ["m3"]),
        helper.make_node("Mul", ["e", "m3"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.ones((100, 8), np.float32), "words"),
        numpy_helper.from_array(np.ones((rows, 8), np.float32), "positions"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([-1], np.int64), "last"),
    ]
    inputs = [tensor_info(n, I64, ["batch", seq]) for n in ("input_ids", "attention_mask")]
    return make_model(nodes, inputs, [tensor_info("y", F, ["batch", seq, 8])], initializers)


def test_a_sequence_defaults_to_128() -> None:
    ids, mask = plan_inputs(load_model(token_model()))
    assert ids.shape == mask.shape == (1, 128)
    assert ids.shape_from == ("default 1", "sequence default 128")
    assert (ids.low, ids.high) == (0, 99)


def test_a_short_position_table_caps_the_sequence() -> None:
    ids, _ = plan_inputs(load_model(token_model(rows=64)))
    assert ids.shape == (1, 64)
    assert ids.shape_from[1] == "sequence default 128, at most 64: rows of 'pos' (Gather)"


@pytest.mark.parametrize(
    ("dim", "size"),
    [(None, 128), ("seq_len", 128), ("sequenceLength", 128), ("past_sequence_length", 1)],
)
def test_which_dims_are_sequences(dim: str | None, size: int) -> None:
    """Token inputs (``*_ids``, ``*_mask``) take 128 on any open dim past axis 0; a KV cache's
    past length does not."""
    model = token_model(seq=dim)
    if dim is not None and "past" in dim:  # named so on a float input: not a token input
        model.graph.input[1].CopyFrom(tensor_info("attention_mask", F, ["batch", dim]))
        model.graph.node[6].attribute[0].i = F
    specs = {s.name: s for s in plan_inputs(load_model(model))}
    assert specs["attention_mask"].shape == (1, size)
    frames = make_model(
        [helper.make_node("Relu", ["a"], ["b"])],
        [tensor_info("a", F, ["batch", "num_frames", 80])],
        [tensor_info("b", F, ["batch", "num_frames", 80])],
    )
    assert plan_inputs(load_model(frames))[0].shape == (1, 128, 80)


def test_a_sequence_over_the_budget_shrinks_and_says_so() -> None:
    """Under a budget 128 tokens exceed, the search runs a shorter sequence."""
    model = ir.from_proto(token_model())
    needed = memory.estimate(model, {"input_ids": (1, 128), "attention_mask": (1, 128)})
    big = needed.total - needed.weights
    session = ort.InferenceSession(
        token_model().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    found = search.find_plan(
        model,
        lambda feeds: list(session.run(None, dict(feeds))),
        label="lm",
        message=str,
        memory_budget=big - 1,
    )
    assert found.search is not None and found.search.tried[0].status == "over budget"
    assert found.specs[0].shape == (1, 64)
    assert found.specs[0].shape_from[1] == "search attempt 1: dim 'sequence' = 64"


# -- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--memory-budget", "2XB"], "unknown unit 'XB'"),
        (["--memory-budget", "0"], "the size must be at least 1 byte"),
        (["--search-timeout", "0"], "x>0"),
    ],
)
def test_bad_budgets_are_usage_errors(rec: tuple[Path, Path], args: list[str], says: str) -> None:
    original, rewritten = rec
    result = CliRunner().invoke(main, ["validate", str(original), str(rewritten), *args])
    assert result.exit_code == 2 and says in result.stderr and args[0] in result.stderr


def test_budgets_are_validate_options(rec: tuple[Path, Path], tmp_path: Path) -> None:
    original, _ = rec
    out = tmp_path / "o.onnx"
    result = CliRunner().invoke(
        main, ["convert", str(original), str(out), "--memory-budget", "1GiB"]
    )
    assert result.exit_code == 2 and "--memory-budget applies only with --validate" in result.stderr
    with pytest.raises(ModelError, match="--memory-budget"):
        quantgraph.validate(original, original, memory_budget="lots")
    assert parse_size(input_args.MEMORY_BUDGET_DEFAULT) == search.DEFAULT_MEMORY_BUDGET
    assert input_args.MEMORY_BUDGET_DEFAULT_BYTES == search.DEFAULT_MEMORY_BUDGET
    assert input_args.InputArgs().memory_budget == search.DEFAULT_MEMORY_BUDGET
    assert input_args.SEARCH_TIMEOUT_DEFAULT == search.DEFAULT_SEARCH_TIMEOUT
    from quantgraph.bench import models as bench_models

    assert bench_models.MEMORY_BUDGET == search.DEFAULT_MEMORY_BUDGET
    assert bench_models.SEARCH_TIMEOUT == search.DEFAULT_SEARCH_TIMEOUT


def test_a_budget_nothing_fits_is_one_line_naming_the_option(rec: tuple[Path, Path]) -> None:
    original, rewritten = rec
    args = ["validate", str(original), str(rewritten), "--memory-budget", "1KiB"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "the generated inputs (x: float32[1,3,224,224]) are estimated to need " in line
    assert "over --memory-budget 1 KiB" in line and "raise --memory-budget" in line
