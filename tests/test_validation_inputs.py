"""Validation out of the box on the models of issue #21, item 2: each situation built as a small
float model, quantized by onnxruntime's ``quantize_static`` (QDQ) the way users' models are, then
validated through the API and the CLI with no option; the report says where every size and range
came from. Plus the ``--dim`` / ``--val-range`` values the model cannot take (issue #20, item 9).
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType
from onnxruntime.quantization import quantize_static as ort_quantize_static

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError
from quantgraph.ir.model_files import load_model
from quantgraph.validation import InputOptionError, parse_dim, parse_val_range, plan_inputs
from quantgraph.validation.inputs.search import MAX_ATTEMPTS
from tests.builders import make_model, tensor_info

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
Feeds = dict[str, np.ndarray]
RNG = np.random.default_rng(0)


class _Reader(CalibrationDataReader):  # type: ignore[misc]  # onnxruntime ships no stubs
    def __init__(self, samples: Sequence[Feeds]) -> None:
        self._samples = iter(samples)

    def get_next(self) -> Feeds | None:
        return next(self._samples, None)


def quantize_static(
    model: onnx.ModelProto, samples: Sequence[Feeds], **options: object
) -> onnx.ModelProto:
    """``model`` quantized by onnxruntime's quantize_static (QDQ, u8 activations, s8 weights)."""
    root = logging.getLogger()  # quantize_static warns on the root logger: not pre-processed
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory(prefix="quantgraph-inputs-") as folder:
            source, out = Path(folder) / "float.onnx", Path(folder) / "qdq.onnx"
            onnx.save(model, str(source))
            ort_quantize_static(
                str(source),
                str(out),
                _Reader(samples),
                quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                **options,
            )
            quantized = onnx.load(str(out))
    finally:
        root.setLevel(level)
    assert any(n.op_type == "QuantizeLinear" for n in quantized.graph.node)
    return quantized


def _weight(name: str, *shape: int) -> TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32) * 0.3, name)


def gru_model() -> onnx.ModelProto:
    """A text model: x [seq, 2, 8] through a MatMul (quantized: the GRU's X is computed) into a
    GRU whose sequence_lens are the lengths input through Cast -> TopK -> Cast (sorted, as
    packed sequences are)."""
    hidden = 4
    nodes = [
        helper.make_node("MatMul", ["x", "proj"], ["xp"], name="proj"),
        helper.make_node("Cast", ["lengths"], ["lf"], name="to_float", to=F),
        helper.make_node("TopK", ["lf", "two"], ["sorted", "order"], name="sort", axis=0),
        helper.make_node("Cast", ["sorted"], ["lens"], name="to_int", to=I32),
        helper.make_node("GRU", ["xp", "w", "r", "", "lens"], ["y"], name="gru", hidden_size=4),
        helper.make_node("Squeeze", ["y", "one"], ["h"], name="squeeze"),
        helper.make_node("MatMul", ["h", "head"], ["logits"], name="head"),
    ]
    initializers = [
        _weight("proj", 8, 8),
        _weight("w", 1, 3 * hidden, 8),
        _weight("r", 1, 3 * hidden, hidden),
        _weight("head", hidden, 3),
        numpy_helper.from_array(np.array([2], np.int64), "two"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
    ]
    return make_model(
        nodes,
        [tensor_info("x", F, ["seq", 2, 8]), tensor_info("lengths", I64, [2])],
        [tensor_info("logits", F, ["seq", 2, 3])],
        initializers,
    )


def gru_quantized() -> onnx.ModelProto:
    samples: list[dict[str, np.ndarray]] = [
        {
            "x": RNG.standard_normal((5, 2, 8)).astype(np.float32),
            "lengths": np.array([5, 3], np.int64),
        }
        for _ in range(2)
    ]
    return quantize_static(gru_model(), samples)


def vad_model() -> onnx.ModelProto:
    """A voice-activity model: audio [batch, samples] -> Pad(reflect, 20 each side) -> Conv:
    the original refuses 20 samples or fewer (the default is 1)."""
    nodes = [
        helper.make_node("Unsqueeze", ["audio", "one"], ["a3"], name="channel"),
        helper.make_node("Pad", ["a3", "pads"], ["padded"], name="reflect", mode="reflect"),
        helper.make_node("Conv", ["padded", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["speech"], name="relu"),
    ]
    initializers = [
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([0, 0, 20, 0, 0, 20], np.int64), "pads"),
        _weight("w", 4, 1, 3),
    ]
    return make_model(
        nodes,
        [tensor_info("audio", F, ["batch", "samples"])],
        [tensor_info("speech", F, ["batch", 4, "frames"])],
        initializers,
    )


def vad_quantized() -> onnx.ModelProto:
    samples = [{"audio": RNG.standard_normal((1, 64)).astype(np.float32)} for _ in range(2)]
    return quantize_static(vad_model(), samples)


def classifier_model(shape: Sequence[int | str | None]) -> onnx.ModelProto:
    """An image classifier on ``shape`` (PP-OCR's angle classifier: [-1, 3, ?, ?])."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["c"], ["g"], name="pool"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", F, list(shape))],
        [tensor_info("y", F, [None, 2])],
        [_weight("w", 4, 3, 3, 3), _weight("fc", 4, 2)],
    )
    return model


def classifier_quantized(shape: Sequence[int | str | None]) -> onnx.ModelProto:
    samples = [{"x": RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(2)]
    model = classifier_model(["N", 3, "H", "W"])  # quantize on a clean copy, then re-declare
    quantized = quantize_static(model, samples)
    declared = helper.make_tensor_value_info("x", F, list(shape))
    quantized.graph.input[0].CopyFrom(declared)
    quantized.graph.ClearField("value_info")
    return quantized


def detector_model() -> onnx.ModelProto:
    """An ultralytics-style detector on images [1, 3, height, width] (any size runs) whose
    metadata_props say imgsz [320, 320], as ultralytics' export writes them."""
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["c"], name="conv", strides=[2, 2]),
        helper.make_node("Sigmoid", ["c"], ["y"], name="head"),
    ]
    model = make_model(
        nodes,
        [tensor_info("images", F, [1, 3, "height", "width"])],
        [tensor_info("y", F, [1, 4, "h", "w"])],
        [_weight("w", 4, 3, 1, 1)],
    )
    helper.set_model_props(
        model, {"imgsz": "[320, 320]", "stride": "32", "task": "detect", "batch": "1"}
    )
    return model


def detector_quantized() -> onnx.ModelProto:
    samples = [{"images": RNG.standard_normal((1, 3, 320, 320)).astype(np.float32)}]
    return quantize_static(detector_model(), samples)


def embedding_model() -> onnx.ModelProto:
    """Token ids into a table quantize_static turns into a DequantizeLinear output (the Gather's
    data is computed, with no value_info), ids doubled on the way to a second table (a Mul the
    bounds do not follow: the search narrows the integers)."""
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
        helper.make_node("Mul", ["ids", "two"], ["ids2"], name="double"),
        helper.make_node("Gather", ["table", "ids2"], ["e2"], name="embed2"),
        helper.make_node("Add", ["e", "e2"], ["s"], name="add"),
        helper.make_node("MatMul", ["s", "proj"], ["y"], name="proj"),
    ]
    return make_model(
        nodes,
        [tensor_info("ids", I64, ["batch", "seq"])],
        [tensor_info("y", F, ["batch", "seq", 4])],
        [
            _weight("table", 6, 8),
            _weight("proj", 8, 4),
            numpy_helper.from_array(np.array(2, np.int64), "two"),
        ],
    )


def embedding_quantized() -> onnx.ModelProto:
    samples = [{"ids": np.array([[0, 1, 2]], np.int64)}]
    quantized = quantize_static(
        embedding_model(), samples, op_types_to_quantize=["Gather", "MatMul"]
    )
    kept = [v for v in quantized.graph.value_info if v.name == "e"]  # partial value_info
    quantized.graph.ClearField("value_info")
    quantized.graph.value_info.extend(kept)
    return quantized


def write_models(folder: str | Path) -> dict[str, Path]:
    """Each situation quantized, as ``folder/<name>.onnx`` with its conversion beside it
    (``<name>_qg.onnx``); docs/robustness.md's commands run on these:
    ``python -c 'from tests import test_validation_inputs as t;
    t.write_models("scratch")'``."""
    made = {
        "gru": gru_quantized(),
        "vad": vad_quantized(),
        "classifier": classifier_quantized([-1, 3, None, None]),
        "detector": detector_quantized(),
        "embedding": embedding_quantized(),
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    placed = {}
    for name, model in made.items():
        placed[name] = Path(folder) / f"{name}.onnx"
        onnx.save(model, str(placed[name]))
        quantgraph.convert(placed[name]).save(_converted(placed[name]))
    return placed


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_models(tmp_path_factory.mktemp("inputs"))


def _converted(path: Path) -> Path:
    return path.with_name(f"{path.stem}_qg.onnx")


def _cli(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _validate_json(path: Path, *options: object) -> dict[str, object]:
    code, out, err = _cli("validate", path, _converted(path), "--json", *options)
    assert code == 0, (out, err)
    payload: dict[str, object] = json.loads(out)
    assert payload["agree"] is True
    return payload


def _inputs(payload: dict[str, object]) -> dict[str, dict[str, object]]:
    found = payload["inputs"]
    assert isinstance(found, dict)
    return found


# -- out of the box -----------------------------------------------------------------------------


def test_gru_lengths_through_cast_topk_cast_stay_in_the_sequence(models: dict[str, Path]) -> None:
    """Before: lengths drawn from [-100, 100], which the GRU refuses ("Invalid value/s in
    sequence_lens")."""
    path = models["gru"]
    report = quantgraph.validate(path, _converted(path), backend="python", iterations=3)
    assert report.agree and report.input_search is None
    lengths = report.inputs["lengths"]
    assert lengths["range"] == [1, 1]  # seq defaults to 1
    assert lengths["why"] == (
        "sequence_lens of 'gru' (GRU), sequence length 1, through Cast -> TopK -> Cast"
    )
    payload = _validate_json(path, "--dim", "seq=6", "--iterations", "4")
    lengths = _inputs(payload)["lengths"]
    assert lengths["range"] == [1, 6] and "sequence length 6" in str(lengths["why"])
    assert _inputs(payload)["x"]["shape_from"] == ["--dim seq=6", "model", "model"]


def test_a_reflect_pad_gets_a_longer_input_from_the_search(models: dict[str, Path]) -> None:
    """Before: 'Pad reflect requires axis length >= 2' on audio [1, 1]. The search lengthens
    'samples' (16 is still too short for a pad of 20: 64 runs), not the batch."""
    path = models["vad"]
    report = quantgraph.validate(path, _converted(path), backend="python")
    assert report.agree
    assert report.inputs["audio"]["shape"] == [1, 64]
    assert report.inputs["audio"]["shape_from"] == [
        "default 1",
        "search attempt 2: dim 'samples' = 64",
    ]
    search = report.input_search
    assert search is not None and search.attempt == 2 and search.plan == "dim 'samples' = 64"
    assert search.first_error.startswith("Pad node 'reflect': Pad reflect requires axis length")
    payload = _validate_json(path)
    assert payload["input_search"] == search.to_dict()
    code, out, _ = _cli("validate", path, _converted(path))
    assert code == 0
    assert "search attempt 2 runs: dim 'samples' = 64" in out
    assert "sizes: axis 0 = 1 (default 1), axis 1 = 64 (search attempt 2: dim 'samples'" in out
    # A bound dim is never varied: the original's refusal is the answer.
    code, _, err = _cli("validate", path, _converted(path), "--dim", "samples=2")
    assert code == 2 and "Pad reflect: pre-pad (20) exceeds" in err
    assert "audio: float32[1,2]" in err and "other plans failed too (dim 'batch' = 16;" in err


def test_minus_one_and_unnamed_dims_get_sizes_and_can_be_bound(models: dict[str, Path]) -> None:
    """x is [-1, 3, ?, ?] (PP-OCR's classifier). Before: numpy's 'negative dimensions are not
    allowed'."""
    path = models["classifier"]
    report = quantgraph.validate(path, _converted(path), backend="python")
    assert report.agree
    assert report.inputs["x"]["shape"] == [1, 3, 224, 224]
    assert report.inputs["x"]["shape_from"] == [
        "default 1",
        "model",
        "image default 224",
        "image default 224",
    ]
    payload = _validate_json(path, "--dim", "x:0=2", "--dim", "x:2=48", "--dim", "x:-1=192")
    x = _inputs(payload)["x"]
    assert x["shape"] == [2, 3, 48, 192]
    assert x["shape_from"] == ["--dim x:0=2", "model", "--dim x:2=48", "--dim x:-1=192"]
    api = quantgraph.validate(path, _converted(path), backend="python", dims={"x:3": 64})
    assert api.inputs["x"]["shape"] == [1, 3, 224, 64]
    code, out, _ = _cli("run", _converted(path), "--dim", "x:0=3", "--json")
    assert code == 0 and json.loads(out)["outputs"][0]["shape"] == [3, 2]


def test_metadata_imgsz_sizes_the_image(models: dict[str, Path]) -> None:
    """Before: run at 224 without a word about the metadata's [320, 320]."""
    path = models["detector"]
    report = quantgraph.validate(path, _converted(path), backend="python")
    assert report.agree and report.inputs["images"]["shape"] == [1, 3, 320, 320]
    shape_from = report.inputs["images"]["shape_from"]
    assert isinstance(shape_from, list) and shape_from[2:] == ["metadata 'imgsz'"] * 2
    code, out, _ = _cli("validate", path, _converted(path))
    assert code == 0 and "sizes: axes 2, 3 = 320 (metadata 'imgsz')" in out
    # --dim still wins over the metadata.
    payload = _validate_json(path, "--dim", "height=64")
    assert _inputs(payload)["images"]["shape"] == [1, 3, 64, 320]


@pytest.mark.parametrize(
    ("text", "size"), [("640", (640, 640)), ("(480, 640)", (480, 640)), ("[32,48]", (32, 48))]
)
def test_metadata_image_size_spellings(text: str, size: tuple[int, int]) -> None:
    model = detector_model()
    helper.set_model_props(model, {"img_size": text})
    (images,) = plan_inputs(load_model(model))
    assert images.shape[2:] == size
    assert images.shape_from[2:] == ("metadata 'img_size'",) * 2


def test_partial_value_info_and_a_doubled_index(models: dict[str, Path]) -> None:
    """The table is a DequantizeLinear output with no value_info: its rows come from shape
    inference on the planned inputs. ids * 2 also indexes it, which no bound follows: before,
    'indices element out of data bounds'; the search narrows the integers."""
    path = models["embedding"]
    report = quantgraph.validate(path, _converted(path), backend="python", iterations=3)
    assert report.agree
    ids = report.inputs["ids"]
    assert ids["range"] == [0, 1]
    assert str(ids["why"]).startswith("indices of 'embed' (Gather), axis 0 of size 6, narrowed")
    search = report.input_search
    assert search is not None and search.plan == "integers in [0, 1]"
    assert "idx=10 must be within the inclusive range [-6,5]" in search.first_error


def test_a_model_no_plan_runs_says_how_many_were_tried(models: dict[str, Path]) -> None:
    path = models["embedding"]
    code, out, err = _cli("validate", path, _converted(path), "--val-range", "ids:5,5")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "the original model fails on the generated inputs (ids: int64[1,128])" in line
    tried = int(line.split(" other plans failed too")[0].rsplit(" ", 1)[1])
    assert 1 <= tried <= MAX_ATTEMPTS
    assert "--dim INPUT:AXIS=VALUE" in line


# -- bounds through the ops that pass values on -----------------------------------------------

TABLE = numpy_helper.from_array(np.arange(24, dtype=np.float32).reshape(6, 4), "table")


def _chain(nodes: list[onnx.NodeProto], constants: Sequence[TensorProto] = ()) -> onnx.ModelProto:
    """ids int64 [2, 3] -> nodes -> 'v' -> Gather(table of 6 rows) -> y."""
    gather = helper.make_node("Gather", ["table", "v"], ["y"], name="embed")
    return make_model(
        [*nodes, gather],
        [tensor_info("ids", I64, [2, 3])],
        [tensor_info("y", F, None)],
        [TABLE, *constants],
        check=False,
    )


def _const(name: str, values: object, dtype: type = np.int64) -> TensorProto:
    return numpy_helper.from_array(np.array(values, dtype), name)


CHAINS: dict[str, tuple[list[onnx.NodeProto], list[TensorProto]]] = {
    "Cast": ([helper.make_node("Cast", ["ids"], ["v"], to=I32)], []),
    "Identity": ([helper.make_node("Identity", ["ids"], ["v"])], []),
    "Reshape": ([helper.make_node("Reshape", ["ids", "s"], ["v"])], [_const("s", [6])]),
    "Unsqueeze+Squeeze": (
        [
            helper.make_node("Unsqueeze", ["ids", "a"], ["u"]),
            helper.make_node("Squeeze", ["u", "a"], ["v"]),
        ],
        [_const("a", [0])],
    ),
    "Expand": ([helper.make_node("Expand", ["ids", "s"], ["v"])], [_const("s", [4, 2, 3])]),
    "Tile": ([helper.make_node("Tile", ["ids", "r"], ["v"])], [_const("r", [2, 2])]),
    "Concat": (
        [helper.make_node("Concat", ["c", "ids"], ["v"], axis=1)],
        [_const("c", [[0], [5]])],
    ),
    "Slice": (
        [helper.make_node("Slice", ["ids", "b", "e"], ["v"])],
        [_const("b", [1]), _const("e", [3])],
    ),
    "Gather of the value": (
        [helper.make_node("Gather", ["ids", "i"], ["v"], axis=1)],
        [_const("i", [2, 0])],
    ),
    "TopK values": (
        [
            helper.make_node("Cast", ["ids"], ["f"], to=F),
            helper.make_node("TopK", ["f", "k"], ["t", "ti"], axis=1),
            helper.make_node("Cast", ["t"], ["v"], to=I64),
        ],
        [_const("k", [2])],
    ),
    "Min/Max/Clip": (
        [
            helper.make_node("Min", ["ids", "hi"], ["m1"]),
            helper.make_node("Max", ["m1", "lo"], ["m2"]),
            helper.make_node("Clip", ["m2", "lo", "hi"], ["v"]),
        ],
        [_const("lo", 0), _const("hi", 5)],
    ),
    "ReduceMax": ([helper.make_node("ReduceMax", ["ids"], ["v"], keepdims=0)], []),
    "Transpose+Flatten": (
        [
            helper.make_node("Transpose", ["ids"], ["t"], perm=[1, 0]),
            helper.make_node("Flatten", ["t"], ["v"]),
        ],
        [],
    ),
    "Where": (
        [
            helper.make_node("Greater", ["ids", "lo"], ["g"]),
            helper.make_node("Where", ["g", "ids", "lo"], ["v"]),
        ],
        [_const("lo", 0)],
    ),
    "Sub of a constant": ([helper.make_node("Sub", ["ids", "o"], ["v"])], [_const("o", 1)]),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_bounds_follow_values_to_the_gather(chain: str) -> None:
    """Differential: onnxruntime runs the model on every seed's draw; before, ids were drawn in
    [-100, 100] for every chain but Cast/Identity/Reshape/Squeeze."""
    import onnxruntime as ort

    nodes, constants = CHAINS[chain]
    model = _chain(nodes, constants)
    (ids,) = plan_inputs(load_model(model))
    shift = 1 if chain == "Sub of a constant" else 0
    assert (ids.low, ids.high) == (shift, 5 + shift), ids.why
    assert ids.why.startswith("indices of 'embed' (Gather), axis 0 of size 6")
    ops = [n.op_type for n in nodes if n.op_type != "Greater"]  # Greater reads, passes nothing
    assert ids.why.endswith(f", through {' -> '.join(ops)}")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed in range(5):
        session.run(None, {"ids": ids.draw(np.random.default_rng(seed))})


def test_topk_indices_are_not_the_values() -> None:
    """TopK's second output holds positions, not the input's values: no bound passes there."""
    nodes = [
        helper.make_node("Cast", ["ids"], ["f"], to=F),
        helper.make_node("TopK", ["f", "k"], ["t", "v"], axis=1),
    ]
    (ids,) = plan_inputs(load_model(_chain(nodes, [_const("k", [2])])))
    assert ids.why == "default" and (ids.low, ids.high) == (-100, 100)


# -- --dim and --val-range the model cannot take -------------------------------------------------

BAD_OPTIONS = [
    (["--dim", "nosuch=5"], "--dim", "no input dim of the model is named 'nosuch'"),
    (["--dim", "=5"], "--dim", "is empty"),
    (["--dim", "x:9=1"], "--dim", "AXIS must be an integer in [-4, 3]"),
    (["--dim", "x:one=1"], "--dim", "AXIS must be an integer"),
    (["--dim", "x=-3"], "--dim", "'x=-3': a size must be >= 1"),
    (["--dim", "x:1=0"], "--dim", "'x:1=0': a size must be >= 1"),
    (["--dim", "x=abc"], "--dim", "VALUE must be an integer"),
    (["--dim", "x:1=4"], "--dim", "axis 1 of input 'x' is 3 in the model"),
    (["--dim", "x=2"], "--dim", "write x:AXIS=2 to bind an axis of input 'x'"),
    (["--val-range", "x:nan,1"], "--val-range", "NaN is not allowed"),
    (["--val-range", "x:-inf,inf"], "--val-range", "must be finite"),
    (["--val-range", "x:0,1e300"], "--val-range", "input 'x' is float32, whose values lie in"),
    (["--val-range", "x:2,1"], "--val-range", "LOW must not exceed HIGH"),
    (["--val-range", "nosuch:0,1"], "--val-range", "names no input of the model: nosuch"),
]


@pytest.mark.parametrize(("options", "option", "rule"), BAD_OPTIONS, ids=lambda v: str(v))
def test_a_bad_dim_or_range_is_a_usage_error(
    models: dict[str, Path], options: list[str], option: str, rule: str
) -> None:
    """Before: --dim nosuch=5 and =5 were ignored, nan said 'LOW must not exceed HIGH', -inf,inf
    was accepted, 1e300 printed numpy's RuntimeWarning."""
    path = models["classifier"]
    for command in (
        ["validate", path, _converted(path)],
        ["convert", path, path.with_name("never.onnx"), "--validate", "--force"],
    ):
        code, out, err = _cli(*command, *options)
        assert code == 2, (out, err)
        assert f"Invalid value for '{option}'" in err and rule in err, err
        assert "Traceback" not in err and "Warning" not in err
        assert not path.with_name("never.onnx").exists()


def test_a_huge_dim_is_refused_before_allocation(models: dict[str, Path]) -> None:
    path = models["embedding"]
    huge = ["--dim", "batch=1000000", "--dim", "seq=1000000"]
    code, _, err = _cli("validate", path, _converted(path), *huge)
    assert code == 2
    assert "input 'ids' would be int64[1000000,1000000], 7.28 TiB" in err
    assert "at most 1 GiB per input" in err and "float64" not in err
    classifier = models["classifier"]
    with pytest.raises(InputOptionError, match=r"float32\[1,3,100000,100000\], 112 GiB"):
        quantgraph.validate(classifier, _converted(classifier), dims={"x:2": 10**5, "x:3": 10**5})


def test_api_errors_name_the_option() -> None:
    model = load_model(classifier_model([-1, 3, None, None]))
    with pytest.raises(ModelError, match=r"^--dim: 'nosuch=5': "):
        plan_inputs(model, dims={"nosuch": 5})
    with pytest.raises(ModelError, match=r"^--val-range: 'x:0,1e\+300': input 'x' is float32"):
        plan_inputs(model, val_ranges={"x": (0, 1e300)})
    assert parse_dim("x:0=3") == ("x:0", 3) and parse_dim("input:0:1=2") == ("input:0:1", 2)
    for bad in ("x:nan,1", "x:-inf,1", "x:1,inf", "x:1e400,1e401"):
        with pytest.raises(ValueError):
            parse_val_range(bad)


def test_draws_stay_in_range_and_in_their_own_type() -> None:
    """A range reaching float32's limits draws finite values with no numpy warning; float16
    and int8 are drawn as such."""
    model = make_model(
        [
            helper.make_node("Identity", ["a"], ["ya"]),
            helper.make_node("Identity", ["b"], ["yb"]),
            helper.make_node("Identity", ["c"], ["yc"]),
        ],
        [
            tensor_info("a", F, [1000]),
            tensor_info("b", TensorProto.FLOAT16, [1000]),
            tensor_info("c", TensorProto.INT8, [1000]),
        ],
        [tensor_info(n, t, [1000]) for n, t in (("ya", F), ("yb", 10), ("yc", 3))],
    )
    limit = float(np.finfo(np.float32).max)
    ranges = {"a": (-limit, limit), "b": (-2.0, 3.0), "c": (-128, 127)}
    with np.errstate(all="raise"):
        drawn = {
            s.name: s.draw(np.random.default_rng(0))
            for s in plan_inputs(load_model(model), val_ranges=ranges)
        }
    assert drawn["a"].dtype == np.float32 and np.isfinite(drawn["a"]).all()
    assert drawn["b"].dtype == np.float16 and drawn["b"].min() >= -2 and drawn["b"].max() <= 3
    assert drawn["c"].dtype == np.int8 and drawn["c"].min() == -128


# -- a property: any chain of value-passing ops keeps the indices in range -----------------------


Step = tuple[list[onnx.NodeProto], list[TensorProto], tuple[int, ...]]
node = helper.make_node


def _steps(v: str, out: str, c: str, shape: tuple[int, ...]) -> dict[str, Step]:
    """Ops passing int64 ``v`` [shape] on as ``out`` (constants named from ``c``), keyed by the
    path the report must give; each with its nodes, constants and output shape."""
    size, rank, even = int(np.prod(shape)), len(shape), shape[0] % 2 == 0
    steps: dict[str, Step] = {
        "Cast -> Cast": (
            [node("Cast", [v], [f"{out}_32"], to=I32), node("Cast", [f"{out}_32"], [out], to=I64)],
            [],
            shape,
        ),
        "Identity": ([node("Identity", [v], [out])], [], shape),
        "Reshape": ([node("Reshape", [v, c], [out])], [_const(c, [size])], (size,)),
        "Unsqueeze": ([node("Unsqueeze", [v, c], [out])], [_const(c, [0])], (1, *shape)),
        "Transpose": ([node("Transpose", [v], [out])], [], shape[::-1]),
        "Expand": ([node("Expand", [v, c], [out])], [_const(c, [2, *shape])], (2, *shape)),
        "Tile": (
            [node("Tile", [v, c], [out])],
            [_const(c, [2] * rank)],
            tuple(2 * d for d in shape),
        ),
        "Slice": (
            [node("Slice", [v, f"{c}s", f"{c}e", f"{c}a"], [out])],
            [_const(f"{c}s", [0]), _const(f"{c}e", [1]), _const(f"{c}a", [rank - 1])],
            (*shape[:-1], 1),
        ),
        "Concat": (
            [node("Concat", [v, v], [out], axis=0)],
            [],
            (2 * shape[0], *shape[1:]),
        ),
        "Min -> Max": (
            [node("Min", [v, v], [f"{out}_m"]), node("Max", [f"{out}_m", f"{out}_m"], [out])],
            [],
            shape,
        ),
        "ReduceMax": ([node("ReduceMax", [v], [out], keepdims=1)], [], (1,) * rank),
        "TopK": (
            [node("TopK", [v, c], [out, f"{out}_i"], axis=-1)],
            [_const(c, [1])],
            (*shape[:-1], 1),
        ),
        "Where": (
            [node("Greater", [v, v], [f"{out}_g"]), node("Where", [f"{out}_g", v, v], [out])],
            [],
            shape,
        ),
        "Flatten": ([node("Flatten", [v], [out])], [], (shape[0], size // shape[0])),
        "Gather": (
            [node("Gather", [v, c], [out], axis=0)],
            [_const(c, [0])],
            (1, *shape[1:]),
        ),
    }
    if even:
        steps["Split"] = (
            [node("Split", [v], [out, f"{out}_b"], axis=0, num_outputs=2)],
            [],
            (shape[0] // 2, *shape[1:]),
        )
    return steps


@st.composite
def _chains(draw: st.DrawFn) -> tuple[onnx.ModelProto, int, str]:
    rows = draw(st.integers(2, 12))
    nodes: list[onnx.NodeProto] = []
    constants: list[TensorProto] = []
    ops: list[str] = []
    shape: tuple[int, ...]
    name, shape = "ids", (2, 3)
    for count in range(draw(st.integers(1, 4))):
        steps = _steps(name, f"v{count}", f"c{count}", shape)
        op = draw(st.sampled_from(sorted(steps)))
        new_nodes, new_constants, shape = steps[op]
        nodes += new_nodes
        constants += new_constants
        ops.append(op)
        name = f"v{count}"
    table = numpy_helper.from_array(np.zeros((rows, 2), np.float32), "table")
    gather = helper.make_node("Gather", ["table", name], ["y"], name="embed")
    model = make_model(
        [*nodes, gather],
        [tensor_info("ids", I64, [2, 3])],
        [tensor_info("y", F, None)],
        [table, *constants],
        opset=18,
        check=False,
    )
    return model, rows, " -> ".join(ops)


@settings(max_examples=60, deadline=None)
@given(_chains())
def test_any_chain_of_value_passing_ops_keeps_indices_in_range(
    chain: tuple[onnx.ModelProto, int, str],
) -> None:
    """Differential: onnxruntime runs each drawn input; the range is the table's rows."""
    import onnxruntime as ort

    model, rows, ops = chain
    (ids,) = plan_inputs(load_model(model))
    assert (ids.low, ids.high) == (0, rows - 1), ids.why
    assert ids.why.endswith(f"through {ops}"), (ids.why, ops)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed in range(3):
        session.run(None, {"ids": ids.draw(np.random.default_rng(seed))})


def test_the_readme_states_the_search_as_the_code_does() -> None:
    from quantgraph.validation.inputs import memory, plan, search

    guide = (Path(__file__).resolve().parent.parent / "docs" / "guide.md").read_text()
    section = guide[guide.index("## Validation") : guide.index("## Evidence")]
    text = " ".join(section.split())
    assert f"at most {search.MAX_ATTEMPTS} attempts" in text
    assert f"image sizes ({', '.join(map(str, search.SPATIAL_SIZES))})" in text
    assert f"other lengths ({', '.join(map(str, search.LENGTHS))})" in text
    ranges = ", ".join(f"[{low}, {high}]" for low, high in search.INTEGER_RANGES)
    assert f"narrower integer ranges ({ranges}," in text
    assert f"no input over {plan.MAX_INPUT_BYTES >> 30} GiB" in text
    assert f"or {plan.SPATIAL_DEFAULT}, else for a sequence-like dim" in text
    assert f"sequence-like dim {plan.SEQUENCE_DEFAULT}, else {plan.DEFAULT_DIM}." in text
    words = ", ".join(f"`{w}`" for w in sorted(plan.SEQUENCE_WORDS))
    assert all(f"`{w}`" in text for w in plan.SEQUENCE_WORDS), words
    assert f"(default {search.DEFAULT_MEMORY_BUDGET >> 30}GiB;" in text
    assert f"(default {search.DEFAULT_SEARCH_TIMEOUT:g};" in text
    assert "2 x the peak" in text and memory.SCRATCH_FACTOR == 2
    assert "[-100, 100]" in text and plan.INTEGER_RANGE == (-100, 100)


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True))
def test_a_val_range_is_finite_and_ordered_or_refused(low: float, high: float) -> None:
    text = f"x:{low!r},{high!r}"
    try:
        name, (got_low, got_high) = parse_val_range(text)
    except ValueError as error:
        assert str(error).startswith(repr(text))
        assert not (np.isfinite(low) and np.isfinite(high) and low <= high)
    else:
        assert name == "x" and (got_low, got_high) == (low, high)
        assert np.isfinite(got_low) and np.isfinite(got_high) and got_low <= got_high


def test_unnamed_dims_that_must_agree_are_lengthened_together() -> None:
    """a [1, ?] + b [1, ?] (unnamed dims: nothing says they are one) into a reflect Pad of 20:
    lengthening one alone breaks the Add, so the search's 'every default dim past axis 0'
    attempt is the one that runs."""
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"], name="mix"),
        helper.make_node("Unsqueeze", ["s", "one"], ["s3"], name="channel"),
        helper.make_node("Pad", ["s3", "pads"], ["padded"], name="reflect", mode="reflect"),
        helper.make_node("Conv", ["padded", "w"], ["y"], name="conv"),
    ]
    model = make_model(
        nodes,
        [tensor_info("a", F, [1, None]), tensor_info("b", F, [1, None])],
        [tensor_info("y", F, [1, 4, None])],
        [
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array([0, 0, 20, 0, 0, 20], np.int64), "pads"),
            _weight("w", 4, 1, 3),
        ],
    )
    sample = {n: RNG.standard_normal((1, 64)).astype(np.float32) for n in "ab"}
    quantized = quantize_static(model, [sample])
    report = quantgraph.validate(quantized, quantgraph.convert(quantized).proto)
    assert report.agree
    expected = "search attempt 4: every default dim past axis 0 = 64"
    assert report.inputs["a"]["shape_from"] == report.inputs["b"]["shape_from"]
    assert report.inputs["a"]["shape_from"] == ["model", expected]
    assert report.inputs["a"]["shape"] == [1, 64]


@pytest.mark.parametrize(
    ("elem", "low", "high"),
    [
        (F, -np.inf, np.inf),
        (F, -2.0, 3.0),
        (TensorProto.FLOAT16, -np.inf, np.inf),
        (I64, -5, 9),
        (TensorProto.UINT8, 0, 100),
        (TensorProto.BOOL, 0, 1),
    ],
)
def test_a_seed_draws_what_one_whole_array_draw_gives(
    monkeypatch: pytest.MonkeyPatch, elem: int, low: float, high: float
) -> None:
    """Drawn in chunks (here of 7 elements) to the same values as one float64/int64 draw cast
    to the input's type: a seed gives the inputs it always gave."""
    from quantgraph.validation.inputs import plan

    monkeypatch.setattr(plan, "DRAW_CHUNK", 7)
    dtype = ir.DataType(elem)
    spec = plan.InputSpec("x", dtype, (5, 6), low, high, "test")
    got = spec.draw(np.random.default_rng(3))
    rng = np.random.default_rng(3)
    whole: np.ndarray
    if np.isinf(low):
        whole = rng.standard_normal((5, 6))
    elif elem == F:
        whole = rng.uniform(low, high, (5, 6))
    else:
        whole = rng.integers(int(low), int(high), (5, 6), endpoint=True)
    want = whole.astype(dtype.numpy())
    assert got.dtype == want.dtype and got.shape == (5, 6)
    np.testing.assert_array_equal(got, want)
