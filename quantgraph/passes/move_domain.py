"""Move every node of one domain to another, opset imports included (models and functions)."""

from __future__ import annotations

import onnx_ir as ir

from ..ir.walk import all_graphs


class MoveDomainPass(ir.passes.InPlacePass):
    """Nodes of ``source`` become nodes of ``target`` at the same opset version.

    A backend uses it to run a model's ops with kernels registered under a domain of its own.
    """

    def __init__(self, source: str, target: str) -> None:
        super().__init__()
        self.source = source
        self.target = target

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        moved = False
        for graph in all_graphs(model):
            for node in graph:
                if node.domain != self.source:
                    continue
                node.domain = self.target
                moved = True
                if isinstance(graph, ir.Function):
                    graph.opset_imports[self.target] = graph.opset_imports.get(self.source, 1)
        if moved:
            model.opset_imports[self.target] = model.opset_imports.get(self.source, 1)
        return ir.passes.PassResult(model, moved)
