"""Rewriting nodes in place: new constants and names for one graph, a node turned into
another op, inputs left unused swept away."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
import onnx_ir as ir

from .names import Names
from .values import tensor_dims
from .walk import GraphLike


class ConstantFactory:
    """Creates 1-D constants for one graph: initializers in the main graph, Constant nodes
    elsewhere (functions cannot hold initializers), or beside the constant they stand for
    (``like``: an initializer of a subgraph, or of an outer graph a subgraph captures, gets its
    replacement there, so that lowering can give it back where it was). Same request, same
    value: shared scale and zero-point initializers stay shared after the rewrite."""

    def __init__(self, graph: GraphLike, is_main: bool, names: Names) -> None:
        self.graph = graph
        self.is_main = is_main
        self._cache: dict[tuple[object, ...], ir.Value] = {}
        self._as_1d: dict[int, ir.Value] = {}  # by source value: skips re-keying by content
        self.names = names

    def unique_name(self, base: str) -> str:
        """A node or value name no other in the model has (:class:`~.names.Names`)."""
        return self.names.unique(base)

    def constant(
        self,
        base_name: str,
        array: np.ndarray,
        before: ir.Node,
        *,
        like: ir.Value | None = None,
        tensor: ir.TensorProtocol | None = None,
    ) -> ir.Value:
        """A constant of ``array`` (``tensor`` when given: its encoding, raw_data or typed
        fields, is kept), placed as the class says."""
        key = (base_name, array.dtype.str, array.tobytes() + str(array.shape).encode())
        return self.tensor_constant(
            base_name, ir.tensor(array) if tensor is None else tensor, before, like=like, key=key
        )

    def tensor_constant(
        self,
        base_name: str,
        tensor: ir.TensorProtocol,
        before: ir.Node,
        *,
        like: ir.Value | None = None,
        key: tuple[object, ...],
    ) -> ir.Value:
        """A constant holding ``tensor`` as it is (a derived tensor is not read), placed as
        the class says; one per ``key`` (what the tensor is made of, as the caller knows it)."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        name = self.unique_name(base_name)
        tensor.name = name
        home: GraphLike | None = None
        if like is not None and like.is_initializer():
            home = like.graph
        if home is None and (self.is_main or tensor.dtype.bitwidth < 8):
            # Constant holds 4-bit tensors from opset 21 only; a subgraph holds initializers
            home = self.graph
        shape = ir.Shape(tensor_dims(tensor))
        if isinstance(home, ir.Graph):
            value = ir.Value(
                name=name, shape=shape, type=ir.TensorType(tensor.dtype), const_value=tensor
            )
            home.register_initializer(value)
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
            value.shape = shape
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
            flat = array.reshape(-1)
            # Stored as its source was (typed fields or raw_data): lowering writes the scalar
            # back in the same encoding. (Not a tensor metadata mark: onnx-ir 1.1 writes a
            # read tensor's metadata_props twice, so a converted model would change when
            # converted again.)
            source = ir.convenience.get_const_tensor(value)
            tensor = (
                typed_tensor(flat, source.dtype)
                if source is not None and typed_fields(value)
                else ir.tensor(flat)
            )
            cached = self.constant(f"{value.name}_1d", flat, before, like=value, tensor=tensor)
            self._as_1d[id(value)] = cached
        return cached

    def known_1d(self, value: ir.Value) -> ir.Value | None:
        """The 1-D constant :meth:`constant_1d` made of ``value`` already, None before: a caller
        skips reading the constant again for each of its thousands of users."""
        return self._as_1d.get(id(value))

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


def typed_fields(value: ir.Value) -> bool:
    """Whether ``value``'s constant is stored in the typed fields (float_data, int32_data...),
    as onnx.helper.make_tensor writes it (onnxruntime's quantizers' scales and zero points)."""
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return False
    raw = getattr(tensor, "raw", None)
    return isinstance(raw, onnx.TensorProto) and not raw.HasField("raw_data")


def typed_tensor(array: np.ndarray, dtype: ir.DataType) -> ir.TensorProtocol:
    """``array`` as a tensor in the typed fields of ``dtype`` (see :func:`typed_fields`)."""
    proto = onnx.helper.make_tensor("", int(dtype), array.shape, array.reshape(-1))
    return ir.serde.TensorProtoTensor(proto)


_WIDE_FOR_4_BIT = {ir.DataType.INT4: ir.DataType.INT8, ir.DataType.UINT4: ir.DataType.UINT8}


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
    count = len(former)
    if len(inputs) != count:
        old.resize_inputs(len(inputs))
    for index, value in enumerate(inputs):
        # what the node holds at index: as it was (a resize adds None, changes only the rest)
        if (former[index] if index < count else None) is not value:
            old.replace_input_with(index, value)
    held = old.attributes
    if held:  # (clearing an empty UserDict raises and catches a KeyError)
        held.clear()
    for attribute in attributes:
        held[attribute.name] = attribute
    for output in old.outputs:
        if output.type is None:
            output.type = ir.TensorType(dtype)
    return former
