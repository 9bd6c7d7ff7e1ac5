"""The edges of validation a first hour meets (issue 42, item 6): a float model against its
quantized form is judged by a stated criterion that can agree (each output's SQNR, 20 dB by
default, --min-sqnr to change; --atol/--rtol alone judge element by element); arguments given
the wrong way round get one message everywhere (plain validate, --sensitivity, bench --model);
lower with nothing to lower is an error as convert's is; a verdict on very few values says so
and how to compare more."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnxruntime
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError, NoQuantization, NothingToLower
from quantgraph.schemas_json import schema
from quantgraph.validation import make_inputs
from quantgraph.validation.report import DEFAULT_MIN_SQNR

from . import exported_transformer

SWAPPED = "the arguments look swapped: quantgraph {command} {first} {second}"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("edges")
    found = {
        "float": exported_transformer.float_model(),
        "s8": exported_transformer.quantized("s8"),
        "dynamic": exported_transformer.dynamic_quantized(),
    }
    paths = {}
    for name, model in found.items():
        paths[name] = folder / f"{name}.onnx"
        onnx.save(model, paths[name])
    paths["converted"] = folder / "converted.onnx"
    quantgraph.convert(paths["s8"]).save(paths["converted"])
    return paths


def _run(args: list[str | Path]) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def _sqnr(float_path: Path, quantized: Path, seeds: range) -> float:
    """numpy's SQNR of the quantized model's only output against the float one's, both run
    by onnxruntime at ORT_DISABLE_ALL on validate's inputs."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    sessions = [onnxruntime.InferenceSession(str(p), options) for p in (float_path, quantized)]
    signal = noise = 0.0
    for seed in seeds:
        feeds = make_inputs(float_path, seed=seed)
        want, got = (np.asarray(s.run(None, feeds)[0], np.float64) for s in sessions)
        signal += float(np.sum(want**2))
        noise += float(np.sum((want - got) ** 2))
    return 10 * math.log10(signal / noise)


def test_a_float_model_and_its_quantized_form_can_agree(models: dict[str, Path]) -> None:
    for form in ("s8", "dynamic", "converted"):
        report = quantgraph.validate(models["float"], models[form], iterations=3)
        assert report.min_sqnr == DEFAULT_MIN_SQNR
        sqnr = report.output_sqnr("y")
        assert sqnr is not None
        quantized = models["s8"] if form == "converted" else models[form]
        assert sqnr == pytest.approx(_sqnr(models["float"], quantized, range(3)), rel=1e-9)
        assert report.agree is (sqnr >= DEFAULT_MIN_SQNR), (form, sqnr)
        assert report.agree, (form, sqnr)  # int8 on a small transformer: well above 20 dB
        assert "SQNR over all samples at least 20 dB" in report.criterion
        # the criterion moves the verdict: just above the SQNR measured, it disagrees
        stricter = quantgraph.validate(
            models["float"], models[form], iterations=3, min_sqnr=sqnr + 0.01
        )
        assert not stricter.agree


def test_the_criterion_is_stated_overridable_and_in_the_json(models: dict[str, Path]) -> None:
    base: list[str | Path] = ["validate", models["float"], models["s8"]]
    code, out = _run(base)
    assert code == 0, out
    assert "criterion: each output's SQNR over all samples at least 20 dB" in out
    assert "(meets the criterion)" in out and "sqnr=" in out
    code, out = _run([*base, "--min-sqnr", "80"])
    assert code == 1 and "(BEYOND the criterion)" in out
    code, out = _run([*base, "--json"])
    found = json.loads(out)
    jsonschema.validate(found, schema("validate"))
    assert (found["agree"], found["min_sqnr_db"]) == (True, 20.0)
    assert found["criterion"].startswith("each output's SQNR")
    # a tolerance alone judges element by element, as before; with --min-sqnr, both judge
    code, out = _run([*base, "--atol", "1e-6", "--json"])
    found = json.loads(out)
    assert (code, found["agree"], found["min_sqnr_db"]) == (1, False, None)
    assert found["criterion"].startswith("every element within atol")
    code, out = _run([*base, "--atol", "10", "--min-sqnr", "80", "--json"])
    assert (code, json.loads(out)["agree"]) == (1, False)


def test_min_sqnr_where_it_judges_nothing_is_refused(models: dict[str, Path]) -> None:
    code, out = _run(["validate", models["s8"], models["converted"], "--min-sqnr", "30"])
    assert code == 2
    assert "quantgraph: error: --min-sqnr 30 would judge nothing" in out
    with pytest.raises(ModelError, match="--min-sqnr 30 would judge nothing"):
        quantgraph.validate(models["s8"], models["converted"], min_sqnr=30)


@pytest.mark.parametrize("quantized", ["s8", "converted"])
@pytest.mark.parametrize("sensitivity", [[], ["--sensitivity"], ["--sensitivity", "2"]])
def test_swapped_arguments_get_one_message(
    models: dict[str, Path], quantized: str, sensitivity: list[str]
) -> None:
    code, out = _run(["validate", models[quantized], models["float"], *sensitivity])
    message = SWAPPED.format(command="validate", first=models["float"], second=models[quantized])
    assert code == 2 and message in out, out
    assert out.count("\n") == 1  # one line


def test_swapped_converted_and_qdq_get_the_same_message(models: dict[str, Path]) -> None:
    message = SWAPPED.format(command="validate", first=models["s8"], second=models["converted"])
    for extra in ([], ["--sensitivity"]):
        code, out = _run(["validate", models["converted"], models["s8"], *extra])
        assert code == 2 and message in out, out
    code, out = _run(["bench", "--model", models["converted"], models["s8"], "--rounds", "1"])
    message = SWAPPED.format(
        command="bench --model", first=models["s8"], second=models["converted"]
    )
    assert code == 2 and message in out, out


def test_sensitivity_between_two_quantized_models_says_why(models: dict[str, Path]) -> None:
    code, out = _run(["validate", models["s8"], models["converted"], "--sensitivity"])
    assert code == 2
    assert "--sensitivity needs a float ORIGINAL and its quantized form as REWRITTEN: " in out
    assert f"ORIGINAL ({models['s8']}) is quantized" in out


@pytest.mark.parametrize("form", ["s8", "float"])
def test_lower_with_nothing_to_lower_is_an_error_as_convert_s(
    models: dict[str, Path], form: str, tmp_path: Path
) -> None:
    out = tmp_path / "out.onnx"
    code, text = _run(["lower", models[form], out])
    assert code == 2 and not out.exists()
    assert text.startswith(f"quantgraph: error: {models[form]}: the model holds no quantgraph op")
    assert text.count("\n") == 1
    if form == "float":  # convert's error on the same model has the same exit code and shape
        convert_code, convert_text = _run(["convert", models[form], out])
        assert convert_code == code and convert_text.count("\n") == 1
        assert "the model holds no quantization" in convert_text
        with pytest.raises(NoQuantization):
            quantgraph.convert(models[form])
    with pytest.raises(NothingToLower, match="holds no quantgraph op to lower"):
        quantgraph.lower(models[form])


def _one_score() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """x [1, 8] -> MatMul [8, 1] -> y [1, 1], and its quantize_static QDQ form."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    rng = np.random.default_rng(2)
    weight = numpy_helper.from_array(rng.standard_normal((8, 1)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="score")],
        "score",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.samples = iter(
                [{"x": rng.standard_normal((1, 8)).astype(np.float32)} for _ in range(4)]
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.samples, None)

    with tempfile.TemporaryDirectory() as scratch:
        source, target = Path(scratch) / "f.onnx", Path(scratch) / "q.onnx"
        onnx.save(model, source)
        quantize_static(source, target, Reader(), quant_format=QuantFormat.QDQ)
        return model, onnx.load(target)


def test_a_verdict_on_one_value_says_so_and_how_to_get_more(tmp_path: Path) -> None:
    float_model, quantized = _one_score()
    float_path, qdq_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(float_model, float_path)
    onnx.save(quantized, qdq_path)
    converted = tmp_path / "c.onnx"
    quantgraph.convert(qdq_path).save(converted)
    for first, second in ((float_path, qdq_path), (qdq_path, converted)):
        code, out = _run(["validate", first, second])
        assert "note: only 1 output value compared (1 sample of 'y' [1, 1])" in out, out
        assert "--iterations 100 (iterations=100) compares 100" in " ".join(out.split())
        code, out = _run(["validate", first, second, "--json"])
        found = json.loads(out)
        assert found["values_compared"] == 1 and "only 1 output value" in found["few_values"]
        code, out = _run(["validate", first, second, "--iterations", "100", "--json"])
        found = json.loads(out)
        assert code in (0, 1)
        assert (found["values_compared"], found["few_values"]) == (100, None)
    sample = tmp_path / "x.npy"
    np.save(sample, np.ones((1, 8), np.float32))
    report = quantgraph.validate(qdq_path, converted, inputs=sample)
    assert report.few_values is not None and "more sample files to --inputs" in report.few_values
