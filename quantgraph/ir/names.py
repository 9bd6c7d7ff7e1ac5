"""New node and value names: the one place that makes them, each unique in the whole model.

A rewrite that names a node after the tensor it reads (``x_DequantizeLinear``) or copies a node
(one DequantizeLinear per reader) must not repeat a name: onnxruntime refuses a graph with two
nodes of one name ("two nodes with same node name"), and a repeated value name silently joins
two tensors. Every name of every graph, subgraph and function counts as taken, and every name
given out is taken from then on."""

from __future__ import annotations

from collections.abc import Iterable

import onnx
import onnx_ir as ir

from .walk import proto_graphs, used_names


class Names:
    """Names in use, and new ones that collide with none of them (``base``, else ``base_1``,
    ``base_2``, ...)."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._taken = {name for name in taken if name}

    @classmethod
    def of(cls, model: ir.Model) -> Names:
        """Every node and value name of ``model`` (all graphs and functions)."""
        return cls(used_names(model))

    @classmethod
    def of_proto(cls, model: onnx.ModelProto) -> Names:
        """The same for a serialized model (its graphs, subgraphs and functions)."""
        taken: set[str] = set()
        graphs = list(proto_graphs(model.graph))
        nodes = [node for function in model.functions for node in function.node]
        graphs += [g for node in nodes for g in _attribute_graphs(node)]
        nodes += [node for graph in graphs for node in graph.node]
        for graph in graphs:
            taken.update(v.name for v in graph.input)
            taken.update(t.name for t in graph.initializer)
        for function in model.functions:
            taken.update(function.input)
        for node in nodes:
            taken.add(node.name)
            taken.update(node.output)
        return cls(taken)

    def __contains__(self, name: object) -> bool:
        return name in self._taken

    def take(self, name: str) -> None:
        """Count ``name`` as used (a name given back as it was, e.g. by lowering)."""
        if name:
            self._taken.add(name)

    def unique(self, base: str) -> str:
        """``base`` when no node or value has it yet, else the first free ``base_N``; taken
        from now on."""
        name, index = base, 1
        while name in self._taken:
            name = f"{base}_{index}"
            index += 1
        self._taken.add(name)
        return name


def _attribute_graphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    held = [a.g for a in node.attribute if a.HasField("g")]
    held += [g for a in node.attribute for g in a.graphs]
    return [inner for graph in held for inner in proto_graphs(graph)]
