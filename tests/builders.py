"""Test models and the helpers that read and run them, shared by the test files.

Models are ONNX protos built with :mod:`quantgraph.testing`: :func:`make_model` for any graph,
:func:`spec_op_model` for one quantgraph op, :func:`quantize_linear_model` and
:func:`dequantize_linear_model` for one ONNX QuantizeLinear/DequantizeLinear. An op's input is
an :data:`Operand`: a graph input as ``(element type, shape)``, a constant (an array or a
TensorProto, which becomes an initializer), or ``""`` for an empty optional input.

Running: :func:`ort_session` is onnxruntime's own CPU kernels at ORT_DISABLE_ALL (the
independent oracle); :func:`differential` runs a model there and its rewrite on a quantgraph
backend and asserts bit-identical outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, cast

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import quantgraph
from quantgraph import testing
from quantgraph.backends import native_available
from quantgraph.backends.onednn import unavailable_reason as onednn_unavailable
from quantgraph.ir.model_files import ModelLike
from quantgraph.spec import DOMAIN, OPS
from quantgraph.testing import IR_VERSION as IR_VERSION
from quantgraph.testing import OPSET as OPSET
from quantgraph.testing import make_model as make_model
from quantgraph.testing import tensor_info as tensor_info

Shape = testing.Shape
Operand = tuple[int, Shape] | np.ndarray | TensorProto | Literal[""]
Feeds = Mapping[str, np.ndarray]

requires_native = pytest.mark.skipif(not native_available(), reason="native backend not built")
BACKENDS = ["python", pytest.param("native", marks=requires_native)]
requires_onednn = pytest.mark.skipif(
    onednn_unavailable() is not None, reason=f"onednn backend: {onednn_unavailable()}"
)
# Every backend, oneDNN's own too: for what all three must agree on (rules, the dst type).
EVERY_BACKEND = [*BACKENDS, pytest.param("onednn", marks=requires_onednn)]


# -- building models ---------------------------------------------------------------------------


def elem_type(array: np.ndarray) -> int:
    """The ONNX element type of a numpy array (ml_dtypes' float8 included)."""
    return int(helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype))


def graph_input(array: np.ndarray) -> tuple[int, Shape]:
    """The operand that feeds ``array`` at run time: a graph input of its type and shape."""
    return elem_type(array), list(np.shape(array))


def _operand_type(operand: Operand | None) -> int | None:
    if operand is None or isinstance(operand, str):
        return None
    if isinstance(operand, TensorProto):
        return int(operand.data_type)
    if isinstance(operand, np.ndarray):
        return elem_type(operand)
    return operand[0]


def _as_operand(op: str, slot: str, value: object) -> Operand | None:
    if value is None or isinstance(value, (np.ndarray, TensorProto, tuple)) or value == "":
        return cast("Operand | None", value)
    raise TypeError(f"{op}'s {slot} is an input: give an Operand, not {value!r}")


def spec_op_model(
    op: str,
    src: Operand,
    scales: Operand | Sequence[float] | None = None,
    zps: Operand | Sequence[int] | None = None,
    *,
    dst_type: int | None = None,
    float_output: bool = False,
    name: str = "node0",
    graph_name: str = "g",
    opset: int = OPSET,
    **attributes: Any,
) -> onnx.ModelProto:
    """One quantgraph op: src (and a dynamic op's scales and zps inputs) -> ``op`` -> dst.

    Static ops (Quantize, Dequantize) take ``scales``/``zps`` as their attributes (lists); the
    dynamic ops as operands (see the module doc). dst has src's shape and ``dst_type`` (None:
    no declared type). ``float_output``: the graph output is ``out``, dst cast to float
    (onnxruntime hands no float8 to numpy; or to leave dst's type to shape inference).

    Not checked: models that break a spec rule on purpose are what many tests need.
    """
    spec = OPS.get(op)
    inputs: dict[str, testing.Input] = {"src": src}
    if spec is not None and spec.is_static:
        # As given: a test of the attribute rules may pass values of the wrong kind.
        attributes.update({k: v for k, v in (("scales", scales), ("zps", zps)) if v is not None})
    else:
        for slot, value in (("scales", scales), ("zps", zps)):
            inputs[slot] = _as_operand(op, slot, value)
    return testing.one_op_model(
        op,
        inputs,
        {"dst": None if dst_type is None else (dst_type, _shape(src))},
        domain=DOMAIN,
        name=name,
        opset=opset,
        float_output="out" if float_output else None,
        graph_name=graph_name,
        **attributes,
    )


def _shape(operand: Operand) -> Shape:
    if isinstance(operand, str):
        return None
    if isinstance(operand, TensorProto):
        return list(operand.dims)
    if isinstance(operand, np.ndarray):
        return list(operand.shape)
    return operand[1]


def fed_spec_op_model(
    op: str,
    src: np.ndarray,
    inputs: Mapping[str, np.ndarray],
    dst_type: int,
    *,
    name: str | None = None,
    **attributes: Any,
) -> onnx.ModelProto:
    """:func:`spec_op_model` whose src and ``inputs`` (scales, zps) are graph inputs of these
    arrays' types and shapes, to be fed at run time; the node is named ``<op>_node``."""
    unknown = set(inputs) - {"scales", "zps"}
    if unknown:
        raise ValueError(f"inputs are scales and zps, not {sorted(unknown)}")
    operands: dict[str, Any] = {slot: graph_input(array) for slot, array in inputs.items()}
    return spec_op_model(
        op,
        graph_input(src),
        dst_type=dst_type,
        name=f"{op}_node" if name is None else name,
        graph_name="spec",
        **operands,  # a static op's scales and zps come with the attributes
        **attributes,
    )


def _qdq_model(
    op_type: str,
    x: Operand,
    scale: Operand,
    zero_point: Operand | None,
    y_type: int,
    *,
    float_output: bool,
    name: str,
    domain: str,
    opset: int,
    check: bool,
    attributes: dict[str, Any],
) -> onnx.ModelProto:
    model = testing.one_op_model(
        op_type,
        {"x": x, "scale": scale, "zero_point": zero_point},
        {"y": (y_type, _shape(x))},
        domain=domain,
        name=name,
        opset=opset,
        float_output="y_float" if float_output else None,
        **attributes,
    )
    if float_output:
        model.graph.node[1].name = "cast"
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def quantize_linear_model(
    x: Operand,
    scale: Operand,
    zero_point: Operand | None = None,
    *,
    y_type: int | None = None,
    float_output: bool = False,
    name: str = "q0",
    domain: str = "",
    opset: int = OPSET,
    check: bool = True,
    **attributes: Any,
) -> onnx.ModelProto:
    """One QuantizeLinear: x, scale (and zero_point) -> y.

    ``y_type``: by default the zero point's type, else ``output_dtype``, else u8 (ONNX's rule).
    ``float_output``: the graph output is ``y_float``, y cast to float (for float8 y).
    """
    if y_type is None:
        y_type = _operand_type(zero_point) or int(attributes.get("output_dtype", TensorProto.UINT8))
    return _qdq_model(
        "QuantizeLinear",
        x,
        scale,
        zero_point,
        y_type,
        float_output=float_output,
        name=name,
        domain=domain,
        opset=opset,
        check=check,
        attributes=attributes,
    )


def dequantize_linear_model(
    x: Operand,
    scale: Operand,
    zero_point: Operand | None = None,
    *,
    y_type: int = TensorProto.FLOAT,
    name: str = "dq0",
    domain: str = "",
    opset: int = OPSET,
    check: bool = True,
    **attributes: Any,
) -> onnx.ModelProto:
    """One DequantizeLinear: x, scale (and zero_point) -> y."""
    return _qdq_model(
        "DequantizeLinear",
        x,
        scale,
        zero_point,
        y_type,
        float_output=False,
        name=name,
        domain=domain,
        opset=opset,
        check=check,
        attributes=attributes,
    )


# -- running models ----------------------------------------------------------------------------


def ort_session(
    model: onnx.ModelProto, options: ort.SessionOptions | None = None
) -> ort.InferenceSession:
    """onnxruntime's own CPU kernels on ``model``, with every graph optimization off."""
    options = options or testing.quiet_session_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return testing.ort_session(model, options)


def run_ort(model: onnx.ModelProto, feeds: Feeds | None = None) -> list[np.ndarray]:
    """Every output of ``model`` on onnxruntime's own kernels."""
    return [np.asarray(out) for out in ort_session(model).run(None, dict(feeds or {}))]


def run_quantgraph(model: ModelLike, backend: str, feeds: Feeds) -> list[np.ndarray]:
    """Every output of a model with quantgraph's ops (a proto, an onnx_ir.Model...) on a
    backend."""
    session = quantgraph.InferenceSession(model, backend)
    return [np.asarray(out) for out in session.run(None, dict(feeds))]


def run_evaluator(
    evaluator: ReferenceEvaluator, outputs: Sequence[str] | None, feeds: Mapping[str, Any]
) -> list[np.ndarray]:
    """ReferenceEvaluator.run's outputs, typed as the list they are (its signature also allows
    the dict that only ``intermediate=True`` gives)."""
    result = evaluator.run(None if outputs is None else list(outputs), dict(feeds))
    assert isinstance(result, list)
    return result


def run_spec_op(
    backend: str,
    op: str,
    src: np.ndarray,
    inputs: Mapping[str, np.ndarray],
    dst_type: int,
    **attributes: Any,
) -> np.ndarray:
    """One quantgraph op on a backend (quantgraph.InferenceSession): its dst for these
    arrays (see :func:`fed_spec_op_model`)."""
    model = fed_spec_op_model(op, src, inputs, dst_type, **attributes)
    return run_quantgraph(model, backend, {"src": src, **inputs})[0]


def assert_identical(
    expected: Sequence[np.ndarray], actual: Sequence[np.ndarray], what: str
) -> None:
    """Same dtypes, shapes and values by quantgraph.reference.compare's rule (bits; any two
    NaNs equal)."""
    testing.assert_bit_identical(expected, actual, what)


def differential(
    original: onnx.ModelProto,
    converted: onnx.ModelProto,
    feeds: Iterable[Feeds],
    backend: str = "python",
) -> None:
    """``original`` on onnxruntime's own kernels and ``converted`` on a quantgraph backend give
    identical outputs for every feed."""
    reference = ort_session(original)
    rewritten = quantgraph.InferenceSession(converted, backend=backend)
    names = [o.name for o in reference.get_outputs()]
    for number, feed in enumerate(feeds):
        assert_identical(
            reference.run(names, dict(feed)), rewritten.run(names, dict(feed)), f"feed {number}"
        )


def assert_runs_alike(
    before: ModelLike, after: ModelLike, feeds: Iterable[Feeds], backend: str
) -> None:
    """Two models with quantgraph's ops (a pass's input and output, say) give identical outputs
    on a quantgraph backend for every feed."""
    first = quantgraph.InferenceSession(before, backend)
    second = quantgraph.InferenceSession(after, backend)
    for number, feed in enumerate(feeds):
        assert_identical(
            first.run(None, dict(feed)), second.run(None, dict(feed)), f"feed {number}"
        )


# -- reading models ----------------------------------------------------------------------------


def initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def node_by_name(graph: onnx.GraphProto | onnx.FunctionProto, name: str) -> onnx.NodeProto:
    found: list[onnx.NodeProto] = [n for n in graph.node if n.name == name]
    assert len(found) == 1, f"expected one node named {name!r}, got {len(found)}"
    return found[0]


def producer(graph: onnx.GraphProto, output: str) -> onnx.NodeProto | None:
    found: list[onnx.NodeProto] = [n for n in graph.node if output in n.output]
    return found[0] if found else None


def all_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node of the main graph, its subgraphs and the model's functions."""

    def walk(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
        for node in nodes:
            yield node
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from walk(attr.g.node)
                for sub in attr.graphs:
                    yield from walk(sub.node)

    yield from walk(model.graph.node)
    for function in model.functions:
        yield from walk(function.node)


def opsets(model: onnx.ModelProto | onnx.FunctionProto) -> dict[str, int]:
    return {o.domain: o.version for o in model.opset_import}


def float_bits(values: object) -> list[int]:
    bits: list[int] = np.asarray(values, np.float32).reshape(-1).view(np.uint32).tolist()
    return bits


def serialize(model: onnx.ModelProto) -> bytes:
    data: bytes = model.SerializeToString(deterministic=True)
    return data


def serialize_vi(value: onnx.ValueInfoProto) -> bytes:
    data: bytes = value.SerializeToString(deterministic=True)
    return data


def serialize_node(node: onnx.NodeProto) -> bytes:
    """A node's bytes; an explicit "" domain and an absent one serialize alike."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    if not copy.domain:
        copy.ClearField("domain")
    data: bytes = copy.SerializeToString(deterministic=True)
    return data
