"""The graph the installed onnxruntime makes of a model at a level (fusion onnxruntime's plan
reads what onnxruntime fused from it), made once for models equal by their fingerprint."""

from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
import onnx_ir as ir

from ...errors import one_line
from ...ir.fingerprint import fingerprint
from ...ir.walk import all_graphs

# Initializers at least this large go to a side file when onnxruntime writes the optimized
# model (weights are never compared by value: an unchanged node keeps its weight's name).
EXTERNAL_THRESHOLD = 1024

# The last model optimized and onnxruntime's graph of it: fusion auto's candidate plans (and
# the session after them) lower the same model alike, and each would make a session for it
# (seconds at LLM size: the weights restored and spilled each time).
_LAST_OPTIMIZED: dict[tuple[bytes, int], onnx.ModelProto] = {}


def optimized_graph(model: ir.Model, level: int) -> onnx.ModelProto:
    """:func:`_optimize`, once for models equal by their fingerprint (read only: shared)."""
    key = (fingerprint(model), level)
    found = _LAST_OPTIMIZED.get(key)
    if found is None:
        found = _optimize(model, level)
        _LAST_OPTIMIZED.clear()
        _LAST_OPTIMIZED[key] = found
    return found


def _optimize(model: ir.Model, level: int) -> onnx.ModelProto:
    """The graph the installed onnxruntime makes of ``model`` at ``level`` (CPU provider)."""
    import onnxruntime as ort

    from ...backends.ort_sessions import ort_session

    with tempfile.TemporaryDirectory(prefix="quantgraph-plan-") as scratch:
        target = Path(scratch) / "optimized.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel(level)
        options.optimized_model_filepath = str(target)
        options.log_severity_level = 4
        if any(n.op_type == "OneDnnPartition" for n in model.graph):  # fusion "auto"
            from ..onednn.onednn_engine import register

            register(options, partitions_only=False)
        # The session is made for its optimized graph only: no kernel is run, so none needs
        # its weights pre-packed (a second copy of them, measured: +170 MB of address space
        # for 208 MiB of weights).
        options.add_session_config_entry("session.disable_prepacking", "1")
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", "optimized.data"
        )
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes",
            str(EXTERNAL_THRESHOLD),
        )
        try:
            ort_session(model, options)
        except Exception as error:
            from ...errors import BackendError

            raise BackendError(
                f"fusion 'onnxruntime': onnxruntime cannot load the model in its Q/DQ form: "
                f"{one_line(error)}"
            ) from None
        return onnx.load(str(target), load_external_data=False)


def weightless_graph(model: ir.Model) -> onnx.ModelProto:
    """``model``'s nodes (every graph's and function's, in one graph) as protos of their op,
    name and value names only, for a model in which onnxruntime has nothing to decide: what the
    plan reads of an optimized graph, without a weight or a session."""
    graph = onnx.GraphProto(name=model.graph.name or "")
    for each in all_graphs(model):
        for node in each:
            graph.node.append(
                onnx.helper.make_node(
                    node.op_type,
                    [v.name or "" if v is not None else "" for v in node.inputs],
                    [v.name or "" for v in node.outputs],
                    name=node.name,
                    domain=node.domain,
                )
            )
    return onnx.ModelProto(graph=graph)


__all__ = ["EXTERNAL_THRESHOLD", "optimized_graph", "weightless_graph"]
