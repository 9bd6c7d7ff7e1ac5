"""One opset rule with one wording for convert, lower, validate, run and inspect (issue 20
item 11): newer than supported says a downgrade is needed, older an upgrade."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError
from quantgraph.ir.opsets import MAX_OPSET, MIN_OPSET, opset_problem
from tests.builders import quantize_linear_model

NEWER = (
    "opset {v} is newer than quantgraph supports (10 to 25): convert the model down to opset 25 "
    "first (onnx.version_converter.convert_version(model, 25), or export it at that opset)"
)
OLDER = (
    "opset {v} is older than quantgraph supports (10 to 25): convert the model up to opset 10 "
    "first (onnx.version_converter.convert_version(model, 10), or export it at that opset)"
)
CASES = [(26, NEWER), (30, NEWER), (9, OLDER)]


def _model(opset: int) -> onnx.ModelProto:
    return quantize_linear_model(
        (TensorProto.FLOAT, [4]),
        np.array(0.5, np.float32),
        np.array(3, np.uint8),
        opset=opset,
        check=False,
    )


def test_the_range_and_its_ends() -> None:
    assert (MIN_OPSET, MAX_OPSET) == (10, 25)
    assert opset_problem(10) is None and opset_problem(25) is None and opset_problem(None) is None
    assert opset_problem(26) == NEWER.format(v=26)


@pytest.mark.parametrize(("opset", "words"), CASES)
def test_every_api_call_refuses_with_the_same_words(opset: int, words: str) -> None:
    model = _model(opset)
    expected = words.format(v=opset)
    calls: list[Callable[[], object]] = [
        lambda: quantgraph.convert(model),
        lambda: quantgraph.lower(model),
        lambda: quantgraph.validate(model, model),
        lambda: quantgraph.InferenceSession(model, "python"),
    ]
    for call in calls:
        with pytest.raises(ModelError) as error:
            call()
        assert str(error.value) == expected


@pytest.mark.parametrize(("opset", "words"), CASES)
def test_every_command_refuses_with_the_same_one_line(
    tmp_path: Path, opset: int, words: str
) -> None:
    source = tmp_path / f"opset{opset}.onnx"
    onnx.save(_model(opset), source)
    out = tmp_path / "out.onnx"
    commands = [
        ["convert", source, out],
        ["lower", source, out],
        ["validate", source, source],
        ["run", source],
        ["inspect", source],
    ]
    for args in commands:
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.strip().splitlines() == [
            f"quantgraph: error: {source}: {words.format(v=opset)}"
        ], args
        assert not out.exists()
