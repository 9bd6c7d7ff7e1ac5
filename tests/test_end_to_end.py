"""End to end on the bundled quantize_static models: convert, then validate against the original.

Every model in models/ (``*_u8.onnx``, ``*_s8.onnx``) is converted dynamically and statically and
must agree exactly (max_abs_diff 0, no mismatches) with the original run at ORT_DISABLE_ALL.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import quantgraph
from quantgraph import DOMAIN
from quantgraph.backends import native_available
from quantgraph.ir.model_files import save_model
from quantgraph.validation import ValidationReport, make_inputs

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
MODELS = sorted([*MODELS_DIR.glob("*_u8.onnx"), *MODELS_DIR.glob("*_s8.onnx")])
QDQ = ("QuantizeLinear", "DequantizeLinear")
BACKENDS = [
    "python",
    pytest.param(
        "native",
        marks=pytest.mark.skipif(not native_available(), reason="native backend not built"),
    ),
]
DIMS = {"batch": 3}


def test_the_bundled_models_are_there() -> None:
    names = {p.name for p in MODELS}
    for family in ("cnn", "transformer", "if_branch"):
        assert {f"{family}_u8.onnx", f"{family}_s8.onnx"} <= names


def _nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    found = []
    for node in graph.node:
        found.append(node)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found.extend(_nodes(attr.g))
            for sub in attr.graphs:
                found.extend(_nodes(sub))
    return found


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module", params=MODELS, ids=[p.stem for p in MODELS])
def model_path(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


def _assert_agree(report: ValidationReport, backend: str) -> None:
    assert report.backend == backend
    assert "ORT_DISABLE_ALL" in report.comparison
    assert report.outputs, "nothing was compared"
    for output in report.outputs:
        assert output.max_abs_diff == 0, output
        assert output.mismatches == 0, output
        assert output.elements > 0
    assert report.agree
    as_dict = report.to_dict()
    assert as_dict["agree"] is True
    outputs = as_dict["outputs"]
    assert isinstance(outputs, list)
    assert [o["name"] for o in outputs] == [o.name for o in report.outputs]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_converted_model_agrees_with_original(model_path: Path, static: bool, backend: str) -> None:
    digest = _sha256(model_path)
    result = quantgraph.convert(model_path, static=static)
    assert _sha256(model_path) == digest, "convert changed its input file"
    dims = DIMS if "transformer" in model_path.name else None  # a dim the model lacks: error
    for seed in (0, 1):
        report = quantgraph.validate(
            model_path, result.proto, backend=backend, seed=seed, dims=dims
        )
        _assert_agree(report, backend)
        if "transformer" in model_path.name:
            shape = report.inputs["input"]["shape"]
            assert isinstance(shape, list) and shape[0] == DIMS["batch"]
    assert _sha256(model_path) == digest, "validate changed its input file"


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_if_branches_agree(tmp_path: Path, backend: str) -> None:
    """Random inputs take one branch; x and -x flip the branch condition (sum of a MatMul)."""
    for path in [p for p in MODELS if p.name.startswith("if_branch")]:
        for static in (False, True):
            converted = tmp_path / f"{path.stem}_{static}.onnx"
            save_model(quantgraph.convert(path, static=static).proto, converted)
            x = make_inputs(path, seed=2)["input"]
            relu_branch = set()
            for sign in (1.0, -1.0):
                feeds = {"input": (x * sign * 3).astype(np.float32)}
                _assert_agree(
                    quantgraph.validate(path, converted, inputs=feeds, backend=backend), backend
                )
                (y,) = ort.InferenceSession(str(path)).run(None, feeds)
                relu_branch.add(bool(y.max() > 1.0))  # the else branch ends in Sigmoid
            assert relu_branch == {True, False}, "both branches must run"


def test_converted_models_have_only_the_expected_leftovers(model_path: Path) -> None:
    original = onnx.load(str(model_path))
    before = Counter(n.op_type for n in _nodes(original.graph) if n.op_type in QDQ)
    for static in (False, True):
        result = quantgraph.convert(model_path, static=static)
        onnx.checker.check_model(result.proto, full_check=True)
        report = result.report
        # Only the int32 bias dequantizations are left, each listed with its reason.
        for skipped in report.skipped:
            assert skipped.op_type == "DequantizeLinear"
            assert "int32" in skipped.reason
        left = [n for n in _nodes(result.proto.graph) if n.op_type in QDQ]
        assert sorted(n.name for n in left) == sorted(s.node for s in report.skipped)
        assert {n.domain for n in left} <= {"", "ai.onnx"}
        counts = Counter(report.converted)
        counts.update(Counter(s.op_type for s in report.skipped))
        assert counts == before
        emitted = report.emitted
        expect = ("Quantize", "Dequantize") if static else ("DynamicQuantize", "DynamicDequantize")
        assert emitted == {
            expect[1]: report.converted["DequantizeLinear"],
            expect[0]: report.converted["QuantizeLinear"],
        }
        # Names and the graph interface survive.
        names_before = {n.name for n in _nodes(original.graph)}
        names_after = {n.name for n in _nodes(result.proto.graph)}
        assert names_before <= names_after
        assert [i.SerializeToString() for i in result.proto.graph.input] == [
            i.SerializeToString() for i in original.graph.input
        ]
        assert [o.SerializeToString() for o in result.proto.graph.output] == [
            o.SerializeToString() for o in original.graph.output
        ]
        opsets = {o.domain: o.version for o in result.proto.opset_import}
        assert opsets[DOMAIN] == 1
        assert {o.domain: o.version for o in original.opset_import}.items() <= opsets.items()
        assert result.proto.producer_name == original.producer_name
        assert list(result.proto.metadata_props) == list(original.metadata_props)


def test_if_branch_models_convert_inside_the_branches() -> None:
    for path in [p for p in MODELS if p.name.startswith("if_branch")]:
        report = quantgraph.convert(path).report
        graphs = {n.graph for n in report.converted_nodes}
        assert {"then", "else"} <= graphs, graphs


def test_transformer_models_keep_the_symbolic_batch_dim() -> None:
    for path in [p for p in MODELS if p.name.startswith("transformer")]:
        result = quantgraph.convert(path)
        dims = result.proto.graph.input[0].type.tensor_type.shape.dim
        assert dims[0].dim_param == "batch"


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_bundled_conversion_is_idempotent_and_deterministic(model_path: Path, static: bool) -> None:
    first = quantgraph.convert(model_path, static=static).proto
    again = quantgraph.convert(model_path, static=static).proto
    first_bytes = first.SerializeToString(deterministic=True)
    assert again.SerializeToString(deterministic=True) == first_bytes
    second = quantgraph.convert(first, static=static)
    assert second.report.converted == {}
    assert second.proto.SerializeToString(deterministic=True) == first_bytes


def test_convert_save_validate_from_files(tmp_path: Path) -> None:
    for path in MODELS:
        out = tmp_path / path.name
        save_model(quantgraph.convert(path).proto, out)
        dims = DIMS if "transformer" in path.name else None  # a dim the model lacks: error
        _assert_agree(quantgraph.validate(path, out, backend="python", dims=dims), "python")
