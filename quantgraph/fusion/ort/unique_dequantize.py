"""One dequantizing spec op per consumer input, as onnxruntime makes them before it fuses.

onnxruntime's ``EnsureUniqueDQForNodeUnit`` runs before every other graph optimization: a
DequantizeLinear read by several node inputs of its own graph is copied so that each input has
its own, and the copies join (or stay out of) a fused kernel one by one. The original keeps its
graph output and subgraph (implicit) readers; with neither, it keeps its first reader.

The onnxruntime engine decides per spec op whether onnxruntime fuses it. Shared, a
dequantizing spec op would be judged once: one reader left unfused (a LayerNormalization) would
keep it a custom op, and that custom op would stop the other reader's unit (a residual Add)
from fusing, though onnxruntime fuses it in the original. Copied first, each copy is judged on
its own reader, and the session's graph is the original's as onnxruntime sees it.
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.names import Names
from ...ir.walk import all_graphs, spec_op


def unique_dequantize(model: ir.Model) -> int:
    """Copies each dequantizing spec op of ``model`` (every graph and function) once per
    same-graph reader input beyond the one it keeps; returns how many copies were made."""
    names = Names.of(model)
    made = 0
    for graph in list(all_graphs(model)):
        for node in list(graph):
            op = spec_op(node)
            if op is None or op.is_quantize:
                continue
            made += _copy_per_reader(node, names)
    return made


def _copy_per_reader(node: ir.Node, names: Names) -> int:
    output = node.outputs[0]
    home = node.graph  # a function's nodes live in its ir.Graph, not the ir.Function
    assert home is not None
    # Readers in this graph, one per input slot (a node reading it twice has two).
    edges = [(use.node, use.idx) for use in output.uses() if use.node.graph is home]
    inner = any(use.node.graph is not home for use in output.uses())
    keeps_one = not inner and not output.is_graph_output()
    copies = edges[1:] if keeps_one else edges
    for reader, index in copies:
        copy = ir.Node(
            node.domain,
            node.op_type,
            list(node.inputs),
            attributes=list(node.attributes.values()),
            name=names.unique(f"{node.name or output.name}/duplicated"),
            num_outputs=1,
            version=node.version,
        )
        copy.metadata_props.update(node.metadata_props)  # e.g. the com.microsoft origin
        result = copy.outputs[0]
        result.name = names.unique(f"{output.name}/duplicated")
        result.type = output.type
        result.shape = output.shape
        home.insert_before(reader, copy)
        reader.replace_input_with(index, result)
    return len(copies)
