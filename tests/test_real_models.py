"""Real quantizer output, several architectures: convert, validate, lower, validate again.

The float models are built here (CNN, transformer block and If from ``models/build_models.py``;
an LSTM, a model-local function, Loop and Scan bodies below) and quantized by
``onnxruntime.quantization.quantize_static`` (QDQ format) with u8 and s8 activations, per-channel
and per-tensor int8 weights. quantize_static only walks ``model.graph.node``: inside If branches,
the function body and Loop/Scan bodies the Q/DQ pairs are added by hand, with min/max parameters
from the same calibration samples.

Each model is converted (dynamic and static ops), must agree exactly with the original at
ORT_DISABLE_ALL on every backend, lowers back to a checker-clean QDQ model, and that must agree
exactly too.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph import DOMAIN
from quantgraph.backends import native_available
from quantgraph.converter import RewriteResult
from quantgraph.testing import ort_session
from quantgraph.validation import ValidationReport, make_inputs

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
QDQ = ("QuantizeLinear", "DequantizeLinear")
requires_native = pytest.mark.skipif(not native_available(), reason="native backend not built")
BACKENDS = ["python", pytest.param("native", marks=requires_native)]
DIMS = {"batch": 2}
OPSET = 17
D = 16  # feature width of the models built here


def _load_build_models() -> ModuleType:
    # models/ is not a package; registered in sys.modules because dataclasses look it up there.
    name = "quantgraph_build_models"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, MODELS_DIR / "build_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bm = _load_build_models()
Feeds = dict[str, np.ndarray]
Container = onnx.GraphProto | onnx.FunctionProto


# -- graph helpers ------------------------------------------------------------------------------


def _graphs(model: onnx.ModelProto) -> Iterator[tuple[str, Container]]:
    """(name, graph or function) for the main graph, every subgraph and every function."""

    def inner(container: Container) -> Iterator[tuple[str, Container]]:
        for node in container.node:
            for attr in node.attribute:
                subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
                for sub in subs:
                    yield sub.name, sub
                    yield from inner(sub)

    yield "", model.graph
    yield from inner(model.graph)
    for function in model.functions:
        yield function.name, function
        yield from inner(function)


def _nodes(model: onnx.ModelProto) -> Iterator[tuple[str, onnx.NodeProto]]:
    for where, container in _graphs(model):
        for node in container.node:
            yield where, node


def _qdq_counts(model: onnx.ModelProto) -> Counter[str]:
    return Counter(n.op_type for _, n in _nodes(model) if n.op_type in QDQ and n.domain == "")


def _int32_dequantizations(model: onnx.ModelProto) -> list[str]:
    """Names of the DequantizeLinear nodes reading an int32 initializer (quantized biases)."""
    found: list[str] = []
    for _, container in _graphs(model):
        inits = {i.name: i for i in getattr(container, "initializer", [])}
        int32 = {name for name, init in inits.items() if init.data_type == TensorProto.INT32}
        found += [
            n.name
            for n in container.node
            if n.op_type == "DequantizeLinear" and n.input[0] in int32
        ]
    return found


def _qdq_consumers(model: onnx.ModelProto) -> dict[str, set[str]]:
    """Per graph/function name: the op types reading a DequantizeLinear output."""
    consumers: dict[str, set[str]] = {}
    for where, container in _graphs(model):
        dq_out = {o for n in container.node if n.op_type == "DequantizeLinear" for o in n.output}
        found = {n.op_type for n in container.node if set(n.input) & dq_out}
        if found:
            consumers[where] = found
    return consumers


def _make_model(
    graph: onnx.GraphProto, functions: list[onnx.FunctionProto] | None = None
) -> onnx.ModelProto:
    imports = [helper.make_opsetid("", OPSET)]
    imports += [helper.make_opsetid(f.domain, 1) for f in functions or []]
    model = helper.make_model(
        graph, opset_imports=imports, functions=functions, producer_name="test_real_models"
    )
    model.ir_version = bm.IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def _value(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _tensor(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def _params(
    names: tuple[str, str], scale: np.ndarray, zero_point: np.ndarray, constants: bool
) -> tuple[list[TensorProto], list[onnx.NodeProto]]:
    """Scale and zero point as initializers or (functions: no initializers) Constant nodes."""
    tensors = [_tensor(names[0], scale), _tensor(names[1], zero_point)]
    if not constants:
        return tensors, []
    nodes = [
        helper.make_node("Constant", [], [t.name], name=f"{t.name}_constant", value=t)
        for t in tensors
    ]
    return [], nodes


def _splice(container: Container, after: str | None, new: list[onnx.NodeProto]) -> None:
    """Insert ``new`` right after the node producing ``after`` (at the start when None)."""
    nodes = list(container.node)
    at = 0 if after is None else next(i for i, n in enumerate(nodes) if after in n.output) + 1
    del container.node[:]
    container.node.extend([*nodes[:at], *new, *nodes[at:]])


def add_activation_qdq(
    container: Container, src: str, samples: np.ndarray, qtype: int, *, constants: bool = False
) -> None:
    """QuantizeLinear -> DequantizeLinear on ``src`` (min/max over ``samples``), consumers
    rewired to the dequantized value."""
    scale, zp = bm._qparams(float(samples.min()), float(samples.max()), qtype)
    zp_dtype = np.uint8 if qtype == TensorProto.UINT8 else np.int8
    names = {k: f"{src}_{k}" for k in ("scale", "zero_point", "quantized", "dequantized")}
    inits, consts = _params(
        (names["scale"], names["zero_point"]),
        np.array(scale, np.float32),
        np.array(zp, zp_dtype),
        constants,
    )
    for node in container.node:
        for i, name in enumerate(node.input):
            if name == src:
                node.input[i] = names["dequantized"]
    params = [names["scale"], names["zero_point"]]
    q = helper.make_node(
        "QuantizeLinear", [src, *params], [names["quantized"]], name=f"{src}_QuantizeLinear"
    )
    dq = helper.make_node(
        "DequantizeLinear",
        [names["quantized"], *params],
        [names["dequantized"]],
        name=f"{src}_DequantizeLinear",
    )
    if isinstance(container, onnx.GraphProto):
        container.initializer.extend(inits)
    _splice(container, src, [*consts, q, dq])


def quantize_weight(
    w: np.ndarray, per_channel: bool, axis: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric int8 (zero point 0) like quantize_static's weights: (q, scale, zero point)."""
    if per_channel:
        other = tuple(a for a in range(w.ndim) if a != axis % w.ndim)
        peak = np.abs(w).max(axis=other, keepdims=True)
    else:
        peak = np.abs(w).max(keepdims=True)
    scale = np.where(peak > 0, peak / 127, 1).astype(np.float32)
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    scale = scale.reshape(-1) if per_channel else scale.reshape(())
    return q, scale, np.zeros(scale.shape, np.int8)


def add_weight_dq(
    container: Container,
    name: str,
    w: np.ndarray,
    per_channel: bool,
    axis: int,
    *,
    quantized_input: bool = False,
) -> np.ndarray:
    """Make weight ``name`` an int8 DequantizeLinear output; returns the int8 values.

    In a graph the float initializer is replaced by an int8 one; with ``quantized_input`` (a
    function) the int8 weight is the function input ``<name>_quantized``, fed by the caller.
    """
    q, scale, zp = quantize_weight(w, per_channel, axis)
    qname = f"{name}_quantized"
    constants = isinstance(container, onnx.FunctionProto)
    inits, consts = _params((f"{name}_scale", f"{name}_zero_point"), scale, zp, constants)
    if isinstance(container, onnx.GraphProto):
        kept = [i for i in container.initializer if i.name != name]
        del container.initializer[:]
        container.initializer.extend([*kept, *inits])
        if not quantized_input:
            container.initializer.append(_tensor(qname, q))
    else:
        container.input[list(container.input).index(name)] = qname
    attrs: dict[str, Any] = {"axis": axis} if per_channel else {}
    dq = helper.make_node(
        "DequantizeLinear",
        [qname, f"{name}_scale", f"{name}_zero_point"],
        [name],
        name=f"{name}_DequantizeLinear",
        **attrs,
    )
    _splice(container, None, [*consts, dq])
    return q


def _dequantized(q: np.ndarray, per_channel: bool, axis: int, w: np.ndarray) -> np.ndarray:
    _, scale, _ = quantize_weight(w, per_channel, axis)
    if per_channel:
        shape = [1] * w.ndim
        shape[axis % w.ndim] = -1
        scale = scale.reshape(shape)
    result: np.ndarray = q.astype(np.float32) * scale
    return result


def _initializer(container: onnx.GraphProto, name: str) -> np.ndarray:
    array: np.ndarray = numpy_helper.to_array(
        next(i for i in container.initializer if i.name == name)
    )
    return array


def _find(model: onnx.ModelProto, op_type: str) -> onnx.NodeProto:
    node: onnx.NodeProto = next(n for n in model.graph.node if n.op_type == op_type)
    return node


def _body(node: onnx.NodeProto, attr: str) -> onnx.GraphProto:
    body: onnx.GraphProto = next(a.g for a in node.attribute if a.name == attr)
    return body


# -- float models built here --------------------------------------------------------------------

LSTM_SEQ, LSTM_HIDDEN = 4, 8


def build_lstm() -> Any:
    """MatMul -> LSTM (Y) -> Squeeze(num_directions) -> MatMul."""
    rng = np.random.default_rng(10)
    h = LSTM_HIDDEN
    inits = [
        _tensor("w_in", bm._weights(rng, D, D)),
        _tensor("lstm_W", (0.3 * rng.standard_normal((1, 4 * h, D))).astype(np.float32)),
        _tensor("lstm_R", (0.3 * rng.standard_normal((1, 4 * h, h))).astype(np.float32)),
        _tensor("lstm_B", (0.1 * rng.standard_normal((1, 8 * h))).astype(np.float32)),
        _tensor("w_out", bm._weights(rng, h, D)),
        _tensor("directions_axis", np.array([1], np.int64)),
    ]
    nodes = [
        helper.make_node("MatMul", ["input", "w_in"], ["x"], name="in_matmul"),
        helper.make_node(
            "LSTM", ["x", "lstm_W", "lstm_R", "lstm_B"], ["Y"], name="lstm", hidden_size=h
        ),
        helper.make_node("Squeeze", ["Y", "directions_axis"], ["ys"], name="squeeze"),
        helper.make_node("MatMul", ["ys", "w_out"], ["output"], name="out_matmul"),
    ]
    shape = (LSTM_SEQ, 1, D)
    graph = helper.make_graph(
        nodes, "lstm", [_value("input", list(shape))], [_value("output", list(shape))], inits
    )
    return bm.ModelSpec("lstm", _make_model(graph), bm._calib(rng, "input", shape))


FUNCTION_SHAPE = (1, 8, D)


def _block_function() -> onnx.FunctionProto:
    return helper.make_function(
        "local",
        "Block",
        ["x", "w", "b"],
        ["y"],
        [
            helper.make_node("MatMul", ["x", "w"], ["mm"], name="block_matmul"),
            helper.make_node("Add", ["mm", "b"], ["pre"], name="block_add"),
            helper.make_node("Relu", ["pre"], ["y"], name="block_relu"),
        ],
        [helper.make_opsetid("", OPSET)],
    )


def build_function() -> Any:
    """MatMul -> local.Block(h, w1, b1) (MatMul + Add + Relu, a model-local function) -> MatMul."""
    rng = np.random.default_rng(11)
    inits = [
        _tensor("w0", bm._weights(rng, D, D)),
        _tensor("w1", bm._weights(rng, D, D)),
        _tensor("b1", (0.1 * rng.standard_normal(D)).astype(np.float32)),
        _tensor("w2", bm._weights(rng, D, D)),
    ]
    nodes = [
        helper.make_node("MatMul", ["input", "w0"], ["h"], name="pre_matmul"),
        helper.make_node("Block", ["h", "w1", "b1"], ["g"], name="block", domain="local"),
        helper.make_node("MatMul", ["g", "w2"], ["output"], name="post_matmul"),
    ]
    shape = list(FUNCTION_SHAPE)
    graph = helper.make_graph(
        nodes, "function", [_value("input", shape)], [_value("output", shape)], inits
    )
    model = _make_model(graph, [_block_function()])
    return bm.ModelSpec("function", model, bm._calib(rng, "input", FUNCTION_SHAPE))


LOOP_TRIPS = 3


def build_loop() -> Any:
    """MatMul -> Loop(3 times: state = Tanh(MatMul(state, W))) -> MatMul."""
    rng = np.random.default_rng(12)
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["loop_cond_in"], ["loop_cond_out"], name="loop_cond"),
            helper.make_node("MatMul", ["loop_state", "loop_w"], ["loop_mm"], name="loop_matmul"),
            helper.make_node("Tanh", ["loop_mm"], ["loop_state_out"], name="loop_tanh"),
        ],
        "loop_body",
        [
            helper.make_tensor_value_info("loop_iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("loop_cond_in", TensorProto.BOOL, []),
            _value("loop_state", [1, D]),
        ],
        [
            helper.make_tensor_value_info("loop_cond_out", TensorProto.BOOL, []),
            _value("loop_state_out", [1, D]),
        ],
        [_tensor("loop_w", 1.5 * bm._weights(rng, D, D))],
    )
    inits = [
        _tensor("w0", bm._weights(rng, D, D)),
        _tensor("w2", bm._weights(rng, D, D)),
        _tensor("trips", np.array(LOOP_TRIPS, np.int64)),
        _tensor("keep_going", np.array(True)),
    ]
    nodes = [
        helper.make_node("MatMul", ["input", "w0"], ["h"], name="pre_matmul"),
        helper.make_node("Loop", ["trips", "keep_going", "h"], ["looped"], name="loop", body=body),
        helper.make_node("MatMul", ["looped", "w2"], ["output"], name="post_matmul"),
    ]
    graph = helper.make_graph(
        nodes, "loop", [_value("input", [1, D])], [_value("output", [1, D])], inits
    )
    return bm.ModelSpec("loop", _make_model(graph), bm._calib(rng, "input", (1, D)))


SCAN_STEPS = 5


def build_scan() -> Any:
    """MatMul -> Scan over time (state = Tanh(MatMul(x_t, W) + state), each state out) -> MatMul."""
    rng = np.random.default_rng(13)
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["scan_x", "scan_w"], ["scan_mm"], name="scan_matmul"),
            helper.make_node("Add", ["scan_mm", "scan_state"], ["scan_sum"], name="scan_add"),
            helper.make_node("Tanh", ["scan_sum"], ["scan_state_out"], name="scan_tanh"),
            helper.make_node("Identity", ["scan_state_out"], ["scan_y"], name="scan_emit"),
        ],
        "scan_body",
        [_value("scan_state", [D]), _value("scan_x", [D])],
        [_value("scan_state_out", [D]), _value("scan_y", [D])],
        [_tensor("scan_w", bm._weights(rng, D, D))],
    )
    inits = [
        _tensor("w0", bm._weights(rng, D, D)),
        _tensor("w2", bm._weights(rng, D, D)),
        _tensor("state0", np.zeros(D, np.float32)),
    ]
    nodes = [
        helper.make_node("MatMul", ["input", "w0"], ["h"], name="pre_matmul"),
        helper.make_node(
            "Scan", ["state0", "h"], ["last", "ys"], name="scan", body=body, num_scan_inputs=1
        ),
        helper.make_node("MatMul", ["ys", "w2"], ["output"], name="post_matmul"),
    ]
    shape = [SCAN_STEPS, D]
    graph = helper.make_graph(
        nodes, "scan", [_value("input", shape)], [_value("output", shape)], inits
    )
    return bm.ModelSpec("scan", _make_model(graph), bm._calib(rng, "input", tuple(shape)))


# -- Q/DQ where quantize_static does not go -----------------------------------------------------


def _outer_h(spec: Any) -> list[np.ndarray]:
    w0 = _initializer(spec.model.graph, "w0")
    return [s["input"] @ w0 for s in spec.calib]


def qdq_function(model: onnx.ModelProto, spec: Any, qtype: int, per_channel: bool) -> None:
    """Block's weight becomes an int8 function input dequantized inside (scale and zero point:
    Constant nodes), and its MatMul output gets a Q/DQ pair."""
    block = next(f for f in model.functions if f.name == "Block")
    w1 = _initializer(model.graph, "w1")
    q = add_weight_dq(block, "w", w1, per_channel, axis=1, quantized_input=True)
    model.graph.initializer.extend([_tensor("w1_quantized", q)])
    call = next(n for n in model.graph.node if n.op_type == "Block")
    call.input[1] = "w1_quantized"
    kept = [i for i in model.graph.initializer if i.name != "w1"]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    w = _dequantized(q, per_channel, 1, w1)
    samples = np.stack([h @ w for h in _outer_h(spec)])
    add_activation_qdq(block, "mm", samples, qtype, constants=True)


def _body_weight_dq(
    model: onnx.ModelProto, op_type: str, weight: str, per_channel: bool
) -> tuple[onnx.GraphProto, np.ndarray]:
    """The body of the model's `op_type` node, its weight behind a DequantizeLinear, and the
    weight's dequantized values."""
    body = _body(_find(model, op_type), "body")
    w = _initializer(body, weight)
    q = add_weight_dq(body, weight, w, per_channel, axis=1)
    return body, _dequantized(q, per_channel, 1, w)


def qdq_loop(model: onnx.ModelProto, spec: Any, qtype: int, per_channel: bool) -> None:
    body, wd = _body_weight_dq(model, "Loop", "loop_w", per_channel)
    samples = []
    for state in _outer_h(spec):
        for _ in range(LOOP_TRIPS):
            samples.append(state @ wd)
            state = np.tanh(samples[-1])
    add_activation_qdq(body, "loop_mm", np.stack(samples), qtype)


def qdq_scan(model: onnx.ModelProto, spec: Any, qtype: int, per_channel: bool) -> None:
    body, wd = _body_weight_dq(model, "Scan", "scan_w", per_channel)
    sums = []
    for h in _outer_h(spec):
        state = np.zeros(D, np.float32)
        for x in h:
            sums.append(x @ wd + state)
            state = np.tanh(sums[-1])
    add_activation_qdq(body, "scan_sum", np.stack(sums), qtype)


Builder = Callable[[], Any]
HandQdq = Callable[[onnx.ModelProto, Any, int, bool], None]

# name: (float model builder, quantize_static's op_types_to_quantize, hand-made Q/DQ)
ARCHITECTURES: dict[str, tuple[Builder, list[str] | None, HandQdq | None]] = {
    "cnn": (bm.build_cnn, None, None),
    "transformer": (bm.build_transformer, None, None),
    # The QDQ quantizer leaves LSTM alone by default; listed, all its inputs get Q/DQ.
    "lstm": (build_lstm, ["MatMul", "LSTM", "Squeeze"], None),
    "if_branch": (bm.build_if_branch, None, None),  # bm.quantize adds the branch Q/DQ
    "function": (build_function, None, qdq_function),
    "loop": (build_loop, None, qdq_loop),
    "scan": (build_scan, None, qdq_scan),
}
VARIANTS = [f"{act}-{w}" for act in ("u8", "s8") for w in ("per_channel", "per_tensor")]
CASES = [f"{arch}-{variant}" for arch in ARCHITECTURES for variant in VARIANTS]


@functools.cache
def float_spec(arch: str) -> Any:
    return ARCHITECTURES[arch][0]()


@functools.cache
def quantized(case: str) -> onnx.ModelProto:
    arch, act, weights = case.split("-")
    _, op_types, hand_qdq = ARCHITECTURES[arch]
    spec = float_spec(arch)
    act_type = bm.VARIANTS[act]
    per_channel = weights == "per_channel"
    # quantize_static warns (root logger) on every call that the model was not pre-processed.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory(prefix="quantgraph-real-") as tmp:
            model: onnx.ModelProto = bm.quantize(
                spec,
                f"{act}_{weights}",
                act_type,
                Path(tmp),
                per_channel=per_channel,
                op_types_to_quantize=op_types,
            )
    finally:
        root.setLevel(level)
    if hand_qdq is not None:
        hand_qdq(model, spec, act_type.tensor_type, per_channel)
    onnx.checker.check_model(model, full_check=True)
    return model


@functools.cache
def converted(case: str, static: bool) -> RewriteResult:
    return quantgraph.convert(quantized(case), static=static)


@functools.cache
def lowered(case: str, static: bool) -> RewriteResult:
    return quantgraph.lower(converted(case, static).proto)


def feeds(case: str) -> list[Feeds]:
    """A random input and its negation (x and -x take both If branches)."""
    model = quantized(case)
    symbols = {d.dim_param for v in model.graph.input for d in v.type.tensor_type.shape.dim}
    # Only dims the model has: binding one it lacks is an error.
    x = make_inputs(model, seed=0, dims={k: v for k, v in DIMS.items() if k in symbols})
    return [x, {k: -v for k, v in x.items()}]


# -- what quantize_static (and the hand-made part) produced --------------------------------------

# Op types that must read a DequantizeLinear output, per graph ("" main, else subgraph/function).
EXPECTED_CONSUMERS: dict[str, dict[str, set[str]]] = {
    "cnn": {"": {"Conv", "Gemm", "MaxPool"}},
    "transformer": {"": {"LayerNormalization", "MatMul", "Add"}},
    "lstm": {"": {"MatMul", "LSTM", "Squeeze"}},
    "if_branch": {"": {"MatMul"}, "then": {"Relu"}, "else": {"Sigmoid"}},
    "function": {"": {"MatMul", "Block"}, "Block": {"MatMul", "Add"}},
    "loop": {"": {"MatMul", "Loop"}, "loop_body": {"MatMul", "Tanh"}},
    "scan": {"": {"MatMul", "Scan"}, "scan_body": {"MatMul", "Tanh"}},
}
SUBGRAPHS = {
    "if_branch": {"then", "else"},
    "function": {"Block"},
    "loop": {"loop_body"},
    "scan": {"scan_body"},
}


def _zero_point_types(model: onnx.ModelProto) -> set[int]:
    types = set()
    for _, container in _graphs(model):
        typed = {i.name: i.data_type for i in getattr(container, "initializer", [])}
        typed.update(
            {
                n.output[0]: n.attribute[0].t.data_type
                for n in container.node
                if n.op_type == "Constant"
            }
        )
        for node in container.node:
            if node.op_type == "QuantizeLinear" and len(node.input) > 2:
                types.add(typed[node.input[2]])
    return types


@pytest.mark.parametrize("case", CASES)
def test_the_quantized_models_have_qdq_where_expected(case: str) -> None:
    arch, act, weights = case.split("-")
    model = quantized(case)
    consumers = _qdq_consumers(model)
    for where, ops in EXPECTED_CONSUMERS[arch].items():
        assert ops <= consumers.get(where, set()), (where, consumers)
    # Activations in the variant's type; weights int8, per-axis only when asked for.
    act_type = TensorProto.UINT8 if act == "u8" else TensorProto.INT8
    assert _zero_point_types(model) == {act_type}
    per_axis = [n for _, n in _nodes(model) if any(a.name == "axis" for a in n.attribute)]
    per_axis = [n for n in per_axis if n.op_type in QDQ]
    if weights == "per_channel":
        assert per_axis
    else:
        assert not per_axis
    if arch == "lstm":  # the LSTM's own weights and bias are dequantized int8
        lstm = _find(model, "LSTM")
        producers = {o: n for n in model.graph.node for o in n.output}
        assert all(producers[i].op_type == "DequantizeLinear" for i in lstm.input)


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("if_branch")])
def test_the_feeds_take_both_if_branches(case: str) -> None:
    model = onnx.ModelProto()
    model.CopyFrom(quantized(case))
    model.graph.output.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    session = ort_session(model)
    taken = {bool(session.run(["cond"], inputs)[0]) for inputs in feeds(case)}
    assert taken == {True, False}


# -- convert, validate, lower, validate ---------------------------------------------------------


def _assert_exact(report: ValidationReport, backend: str) -> None:
    assert report.backend == backend
    assert "ORT_DISABLE_ALL" in report.comparison
    assert report.outputs, "nothing was compared"
    for output in report.outputs:
        assert output.elements > 0
        assert output.max_abs_diff == 0, output
        assert output.mismatches == 0, output
    assert report.agree


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", CASES)
def test_convert_report(case: str, static: bool) -> None:
    arch = case.split("-")[0]
    original = quantized(case)
    result = converted(case, static)
    report = result.report
    onnx.checker.check_model(result.proto, full_check=True)
    assert sum(report.converted.values()) > 0
    # Left alone: the int32 bias dequantizations, each with its reason; nothing else.
    assert sorted(s.node for s in report.skipped) == sorted(_int32_dequantizations(original))
    for skipped in report.skipped:
        assert skipped.op_type == "DequantizeLinear"
        assert "int32" in skipped.reason
    counts = Counter(report.converted)
    counts.update(Counter(s.op_type for s in report.skipped))
    assert counts == _qdq_counts(original)
    left = [n.name for _, n in _nodes(result.proto) if n.op_type in QDQ and n.domain == ""]
    assert sorted(left) == sorted(s.node for s in report.skipped)
    # Converted inside subgraphs and functions too.
    assert SUBGRAPHS.get(arch, set()) <= {n.graph for n in report.converted_nodes}
    for function in result.proto.functions:
        if any(n.domain == DOMAIN for n in function.node):
            assert DOMAIN in {o.domain for o in function.opset_import}
    emitted = set(report.emitted)
    if static:
        assert emitted <= {"Quantize", "Dequantize"}, emitted
    else:
        assert emitted == {"DynamicQuantize", "DynamicDequantize"}


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", CASES)
def test_lower_report(case: str, static: bool) -> None:
    original = quantized(case)
    result = lowered(case, static)
    model = result.proto
    onnx.checker.check_model(model, full_check=True)
    assert result.report.skipped == []
    assert Counter(result.report.converted) == Counter(converted(case, static).report.emitted)
    assert _qdq_counts(model) == _qdq_counts(original)
    assert not [n for _, n in _nodes(model) if n.domain == DOMAIN]
    assert DOMAIN not in {o.domain for o in model.opset_import}
    for function in model.functions:
        assert DOMAIN not in {o.domain for o in function.opset_import}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", CASES)
def test_converted_and_lowered_agree_exactly(case: str, static: bool, backend: str) -> None:
    original = quantized(case)
    for rewritten in (converted(case, static).proto, lowered(case, static).proto):
        for inputs in feeds(case):
            report = quantgraph.validate(original, rewritten, inputs=inputs, backend=backend)
            _assert_exact(report, backend)


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_a_dequantize_of_an_untyped_value_lowers_back(static: bool) -> None:
    """Regression: a static Dequantize has no zps input, so its quantized type is only src's
    type; when the model did not record it (a function input, an intermediate without
    value_info), convert now records it and lower finds it."""
    inits = [_tensor("s", np.array(0.05, np.float32)), _tensor("zp", np.array(3, np.int8))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q"),
        helper.make_node("Transpose", ["q"], ["q_t"], name="t", perm=[1, 0]),
        helper.make_node("DequantizeLinear", ["q_t", "s", "zp"], ["y"], name="dq"),
    ]
    graph = helper.make_graph(nodes, "g", [_value("x", [2, 3])], [_value("y", [3, 2])], inits)
    original = _make_model(graph)
    result = quantgraph.convert(original, static=static)
    back = quantgraph.lower(result.proto)
    assert back.report.skipped == []
    assert _qdq_counts(back.proto) == _qdq_counts(original)
    x = {"x": np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)}
    _assert_exact(quantgraph.validate(original, back.proto, inputs=x, backend="python"), "python")
