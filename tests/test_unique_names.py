"""Node and value names quantgraph writes are unique in the whole model (issue 42, item 4): one
place makes them (quantgraph.ir.names), for the converter's passes, convert --keep-float and
the session's one-DequantizeLinear-per-reader copies; repeated --keep-float accumulates."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from pathlib import Path

import onnx
import onnx_ir as ir
import onnxruntime
import pytest
from click.testing import CliRunner

import quantgraph
from quantgraph.cli import main
from quantgraph.fusion.ort.unique_dequantize import unique_dequantize
from quantgraph.ir.names import Names
from quantgraph.passes.floating.keep_float import keep_float, quantized_names

from . import exported_transformer, producers
from .builders import all_nodes

ROOT = Path(__file__).resolve().parent.parent


def _repeated(names: Iterator[str]) -> list[str]:
    return [name for name, count in collections.Counter(names).items() if name and count > 1]


def _node_names(model: onnx.ModelProto) -> list[str]:
    return _repeated(n.name for n in all_nodes(model))


def _value_names(model: onnx.ModelProto) -> list[str]:
    return _repeated(o for n in all_nodes(model) for o in n.output)


FORMS: dict[str, Callable[[], onnx.ModelProto]] = {
    "qdq_s8": lambda: exported_transformer.quantized("s8"),
    "qdq_u8": lambda: exported_transformer.quantized("u8"),
    "dynamic": exported_transformer.dynamic_quantized,
    "matmul_nbits": exported_transformer.weight_only,
    "qoperator": lambda: producers.static_quantized(qoperator=True),
    "if_branch": lambda: onnx.load(ROOT / "models" / "if_branch_s8.onnx"),
}


@pytest.mark.parametrize("form", FORMS)
def test_convert_and_lower_write_no_name_twice(form: str) -> None:
    original = FORMS[form]()
    assert not _node_names(original) and not _value_names(original)
    converted = quantgraph.convert(original)
    assert not _node_names(converted.proto) and not _value_names(converted.proto)
    lowered = quantgraph.lower(converted.model)
    assert not _node_names(lowered.proto) and not _value_names(lowered.proto)


def test_a_new_name_collides_with_none_in_any_graph() -> None:
    proto = onnx.load(ROOT / "models" / "if_branch_s8.onnx")
    inner = {n.name for n in all_nodes(proto)} - {n.name for n in proto.graph.node} - {""}
    assert inner  # names in If's branches only
    for names in (Names.of(ir.from_proto(proto)), Names.of_proto(proto)):
        for taken in inner:
            assert names.unique(taken) != taken
        assert names.unique("fresh") == "fresh" and names.unique("fresh") == "fresh_1"


def test_keep_float_names_its_relu_apart_from_existing_names() -> None:
    """A model that already holds the names keep_float would give its Relu and value."""
    proto = onnx.load(ROOT / "models" / "cnn_u8.onnx")
    model = ir.from_proto(proto)
    tensors, _ = quantized_names(model.graph)
    assert "relu1" in tensors
    q = next(n for n in proto.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "relu1")
    # nodes named as the Relu and its output would be
    taken = onnx.helper.make_node(
        "Identity", ["relu1"], ["relu1_kept_float"], name=f"{q.name}_kept_float_relu"
    )
    proto.graph.node.append(taken)
    proto.graph.output.append(
        onnx.helper.make_tensor_value_info("relu1_kept_float", onnx.TensorProto.FLOAT, None)
    )
    kept = keep_float(ir.from_proto(proto), ["relu1"])
    written = ir.to_proto(kept)
    assert not _node_names(written) and not _value_names(written)
    onnxruntime.InferenceSession(written.SerializeToString())  # loads: no name twice


def test_one_dequantize_per_reader_names_every_copy_apart() -> None:
    model = quantgraph.convert(exported_transformer.quantized("s8")).model
    assert unique_dequantize(model) > 0
    written = ir.to_proto(model)
    assert not _node_names(written) and not _value_names(written)


def test_repeated_keep_float_accumulates(tmp_path: Path) -> None:
    qdq = tmp_path / "qdq.onnx"
    onnx.save(exported_transformer.quantized("s8"), qdq)
    tensors, _ = quantized_names(ir.from_proto(onnx.load(qdq)).graph)
    first, second, third = sorted(tensors)[:3]

    def kept(*options: str) -> set[str]:
        out = tmp_path / "out.onnx"
        args = ["convert", str(qdq), str(out), "--force", *options]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        model = onnx.load(out)
        quantized = {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
        quantized |= {
            n.input[0] for n in model.graph.node if n.op_type in ("Quantize", "DynamicQuantize")
        }
        return {first, second, third} - quantized

    assert kept("--keep-float", first, "--keep-float", second) == {first, second}
    assert kept("--keep-float", f"{first},{second}") == {first, second}
    assert kept("--keep-float", f"{first},{second}", "--keep-float", third) == {
        first,
        second,
        third,
    }
    assert kept("--keep-float", first, "--keep-float", first) == {first}
    # the same as the API given every name
    api = quantgraph.convert(qdq, keep_float=[first, second]).proto
    out = tmp_path / "out.onnx"
    args = ["convert", str(qdq), str(out), "--force", "--keep-float", first, "--keep-float", second]
    assert CliRunner().invoke(main, args).exit_code == 0
    assert [n.op_type for n in onnx.load(out).graph.node] == [n.op_type for n in api.graph.node]
