"""onnx-ir helpers shared by io, passes and backends: walking every graph, reading constants
and types, making new constants and names. Knows the spec's op names, nothing of runtimes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from ..spec import DOMAIN, OPS, OpSpec

if TYPE_CHECKING:
    import onnx

GraphLike = ir.Graph | ir.Function

STANDARD_DOMAINS = ("", "ai.onnx")


def spec_op(node: ir.Node) -> OpSpec | None:
    """The spec of a quantgraph op node, None for any other node."""
    return OPS.get(node.op_type) if node.domain == DOMAIN else None


def spec_nodes(model: ir.Model) -> Iterator[tuple[GraphLike, ir.Node, OpSpec]]:
    """Every quantgraph op node of every graph and function, with its graph and spec."""
    for graph in all_graphs(model):
        for node in graph:
            op = spec_op(node)
            if op is not None:
                yield graph, node, op


def optional_input(node: ir.Node, index: int) -> ir.Value | None:
    """The node's input ``index``, None when it is absent or left empty."""
    return node.inputs[index] if len(node.inputs) > index else None


def all_graphs(model: ir.Model) -> Iterator[GraphLike]:
    """The main graph, every subgraph (If/Loop/Scan bodies) and every model-local function."""
    yield model.graph
    yield from subgraphs(model.graph)
    for function in model.functions.values():
        yield function
        yield from subgraphs(function)


def subgraphs(graph: GraphLike) -> Iterator[ir.Graph]:
    """Every graph nested in ``graph``'s nodes' attributes, depth first.

    A plain loop: onnx-ir's recursive iterator costs ~1.5 µs a node, which adds up on 100k-node
    graphs that are walked several times.
    """
    graph_types = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
    for node in graph:
        attributes = node.attributes
        if not attributes:
            continue
        for attr in attributes.values():
            if attr.type not in graph_types:
                continue
            for inner in [attr.as_graph()] if attr.type == graph_types[0] else attr.as_graphs():
                yield inner
                yield from subgraphs(inner)


def opset_version(model: ir.Model, graph: GraphLike, domain: str = "") -> int | None:
    """The opset a node of ``domain`` in ``graph`` runs at (functions carry their own imports)."""
    imports = graph.opset_imports if isinstance(graph, ir.Function) else model.opset_imports
    version = imports.get(domain)
    if version is None and domain == "":
        version = imports.get("ai.onnx")
    return version


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The value's array when it is an initializer or comes from a Constant node, else None.

    Cached on the value (``meta``): a scale shared by thousands of nodes is read once.
    """
    if value is None or value.is_graph_input():
        return None  # an initializer that is also an input can be fed: not a constant
    if "quantgraph.constant" in value.meta:
        cached: np.ndarray | None = value.meta["quantgraph.constant"]
        return cached
    tensor = ir.convenience.get_const_tensor(value)
    array = None if tensor is None else tensor.numpy()
    value.meta["quantgraph.constant"] = array
    return array


def _constant_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    # An initializer's tensor, or the value attribute of the Constant node producing it.
    if value.const_value is not None:
        return value.const_value
    return ir.convenience.get_const_tensor(value)


def elem_type(value: ir.Value | None) -> ir.DataType | None:
    """A value's element type: declared, or its constant's."""
    if value is None:
        return None
    if value.dtype is not None:
        return value.dtype
    tensor = _constant_tensor(value)
    return tensor.dtype if tensor is not None else None


def value_shape(value: ir.Value) -> tuple[int | None, ...] | None:
    """Static shape with None for symbolic dims, or None when the rank is unknown."""
    shape: ir.ShapeProtocol | None = value.shape
    if shape is None:
        tensor = _constant_tensor(value)
        shape = tensor.shape if tensor is not None else None
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)


def is_standard(node: ir.Node) -> bool:
    return node.domain in STANDARD_DOMAINS


class ConstantFactory:
    """Creates 1-D constants for one graph: initializers in the main graph, Constant nodes
    elsewhere (functions cannot hold initializers). Same request, same value: shared scale and
    zero-point initializers stay shared after the rewrite."""

    def __init__(self, graph: GraphLike, is_main: bool, taken: set[str]) -> None:
        self.graph = graph
        self.is_main = is_main
        self._cache: dict[tuple[str, str, bytes], ir.Value] = {}
        self._as_1d: dict[int, ir.Value] = {}  # by source value: skips re-keying by content
        self._taken = taken

    def unique_name(self, base: str) -> str:
        name, index = base, 1
        while name in self._taken:
            name = f"{base}_{index}"
            index += 1
        self._taken.add(name)
        return name

    def constant(self, base_name: str, array: np.ndarray, before: ir.Node) -> ir.Value:
        key = (base_name, array.dtype.str, array.tobytes() + str(array.shape).encode())
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        name = self.unique_name(base_name)
        tensor = ir.tensor(array, name=name)
        if self.is_main:
            assert isinstance(self.graph, ir.Graph)
            value = ir.Value(
                name=name,
                shape=ir.Shape(array.shape),
                type=ir.TensorType(tensor.dtype),
                const_value=tensor,
            )
            self.graph.register_initializer(value)
        else:
            node = ir.Node(
                "",
                "Constant",
                [],
                [ir.AttrTensor("value", tensor)],
                name=self.unique_name(f"{name}_constant"),
                num_outputs=1,
            )
            value = node.outputs[0]
            value.name = name
            value.shape = ir.Shape(array.shape)
            value.type = ir.TensorType(tensor.dtype)
            # Constant nodes must come first so that every later node can use them.
            self._insert_first(node, before)
        self._cache[key] = value
        return value

    def constant_1d(self, value: ir.Value, array: np.ndarray, before: ir.Node) -> ir.Value:
        """``value``'s constant ``array`` as a 1-D constant, one per value: a scalar scale shared
        by thousands of nodes is reshaped and looked up once."""
        cached = self._as_1d.get(id(value))
        if cached is None:
            cached = self.constant(f"{value.name}_1d", array.reshape(-1), before)
            self._as_1d[id(value)] = cached
        return cached

    def _insert_first(self, node: ir.Node, before: ir.Node) -> None:
        self.graph.insert_before(before, node)

    def reshaped(
        self,
        value: ir.Value,
        shape: list[int],
        before: ir.Node,
        suffix: str,
        dtype: ir.DataType | None = None,
    ) -> ir.Value:
        """``Reshape(value, shape)`` inserted before ``before``: for run-time scales/zps.

        onnxruntime has no 4-bit Reshape (nor Unsqueeze, Identity...), only Cast: a 4-bit value
        is reshaped as 8-bit and cast back, exact both ways."""
        target = self.constant(
            f"quantgraph_shape_{'x'.join(map(str, shape)) or 'scalar'}",
            np.array(shape, np.int64),
            before,
        )
        known = value.type or (ir.TensorType(dtype) if dtype is not None else None)
        narrow = known.dtype if known is not None else None
        wide = _WIDE_FOR_4_BIT.get(narrow) if narrow is not None else None
        source = value
        if wide is not None:
            source = self._cast(value, wide, before, f"{value.name}_{wide.short_name()}")
        reshape = ir.Node(
            "",
            "Reshape",
            [source, target],
            name=self.unique_name(f"{before.name or value.name}_to_{suffix}"),
            num_outputs=1,
        )
        out = reshape.outputs[0]
        out.name = self.unique_name(f"{value.name}_{suffix}{'_wide' if wide else ''}")
        if known is not None:  # a shape without a type cannot be serialized
            out.type = ir.TensorType(wide) if wide is not None else known
            out.shape = ir.Shape(shape)
        self.graph.insert_before(before, reshape)
        if wide is not None and narrow is not None:
            out = self._cast(out, narrow, before, f"{value.name}_{suffix}")
            out.shape = ir.Shape(shape)
        return out

    def _cast(self, value: ir.Value, to: ir.DataType, before: ir.Node, name: str) -> ir.Value:
        cast = ir.Node(
            "",
            "Cast",
            [value],
            [ir.AttrInt64("to", int(to))],
            name=self.unique_name(f"{name}_cast"),
            num_outputs=1,
        )
        out = cast.outputs[0]
        out.name = self.unique_name(name)
        out.type = ir.TensorType(to)
        out.shape = value.shape
        self.graph.insert_before(before, cast)
        return out


_WIDE_FOR_4_BIT = {ir.DataType.INT4: ir.DataType.INT8, ir.DataType.UINT4: ir.DataType.UINT8}


def used_names(model: ir.Model) -> set[str]:
    """Every value and node name in the model, so that new names collide with none."""
    names: set[str] = set()
    for graph in all_graphs(model):
        names.update(v.name for v in graph.inputs if v.name)
        if isinstance(graph, ir.Graph):
            names.update(graph.initializers)
        for node in graph:
            if node.name:
                names.add(node.name)
            names.update(v.name for v in node.outputs if v.name)
    return names


def remove_if_unused(values: Iterable[ir.Value | None]) -> None:
    """Drop initializers a rewrite left without users (and Constant nodes alike)."""
    unique = {id(v): v for v in values if v is not None}
    for value in unique.values():
        if value is None or value.uses() or value.is_graph_output() or value.is_graph_input():
            continue
        owner = value.graph
        name = value.name
        if value.is_initializer() and owner is not None and name and name in owner.initializers:
            owner.initializers.pop(name)
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant" and producer.graph is not None:
            producer.graph.remove(producer, safe=True)


def replace_node(
    old: ir.Node,
    op: tuple[str, str, int | None],
    inputs: list[ir.Value | None],
    attributes: list[ir.Attr],
    dtype: ir.DataType,
) -> list[ir.Value | None]:
    """Turn ``old`` into an ``op`` = (domain, op_type, version) node with ``inputs`` and
    ``attributes``, in place: its name, doc string, metadata, position and output values (name,
    type, shape, value_info, users) stay; an untyped output gets ``dtype``.

    In place because building a node and rewiring its users costs ~80 µs a node in onnx-ir,
    most of a 100k-node conversion. Returns ``old``'s former inputs: the caller sweeps the ones
    left unused once, at the end (checking uses per node would be quadratic in a scale shared by
    every node).
    """
    domain, op_type, version = op
    former = list(old.inputs)
    old.domain, old.op_type, old.version = domain, op_type, version
    old.resize_inputs(len(inputs))
    for index, value in enumerate(inputs):
        if old.inputs[index] is not value:
            old.replace_input_with(index, value)
    old.attributes.clear()
    for attribute in attributes:
        old.attributes[attribute.name] = attribute
    for output in old.outputs:
        if output.type is None:
            output.type = ir.TensorType(dtype)
    return former


Shape = tuple[int | None, ...]


def inferred_values(model: ir.Model) -> dict[str, tuple[ir.DataType | None, Shape | None]]:
    """Element type and shape (None for symbolic dims) that ONNX shape inference finds for the
    model's values, by name (main graph).

    Run on a serialized copy: nothing it infers is written into ``model`` (the user's
    value_info stays as it was). Empty when inference fails: it is only a hint.
    """
    import onnx

    try:
        proto = negative_dims_unknown(ir.to_proto(model))
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception:
        return {}
    found: dict[str, tuple[ir.DataType | None, Shape | None]] = {}
    for info in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input):
        if not info.type.HasField("tensor_type"):
            continue
        tensor = info.type.tensor_type
        dtype = ir.DataType(tensor.elem_type) if tensor.elem_type else None
        shape = None
        if tensor.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim
            )
        found[info.name] = (dtype, shape)
    return found


def negative_dims_unknown(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Every negative dim value of ``proto``'s declared shapes made unknown (in place; returned).

    For a serialized copy about to meet ONNX's shape inference: a ``-1`` (as Paddle2ONNX
    declares) that reaches Slice's inference trips a ``std::clamp`` assertion that aborts the
    process (onnx 1.23); onnxruntime reads such dims as unknown too."""
    import onnx

    def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
        yield graph
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    yield from graphs(attribute.g)
                for sub in attribute.graphs:
                    yield from graphs(sub)

    for graph in graphs(proto.graph):
        for info in (*graph.input, *graph.output, *graph.value_info):
            if not info.type.HasField("tensor_type"):
                continue
            for dim in info.type.tensor_type.shape.dim:
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.ClearField("dim_value")
    return proto
