"""The shape every rewrite pass shares: visit chosen nodes of every graph, subgraph and function,
rewrite each in place or record why not, sweep what the rewrites left unused."""

from __future__ import annotations

from collections.abc import Callable, Collection

import onnx_ir as ir

from ..ir.names import Names
from ..ir.rewrite import ConstantFactory, remove_if_unused
from ..ir.walk import GraphLike, all_graphs
from ..spec import DOMAIN, OPSET_VERSION
from .report import ConvertedNode, RewriteReport, RewriteResult, Skip, SkippedNode
from .requirements import schemas_registered, supported_opset

Progress = Callable[[int, int], None]  # (nodes done, nodes in all)


class NodeRewritePass(ir.passes.InPlacePass):
    """Base of the rewrite passes. Subclasses say which nodes they visit (:meth:`matches`) and
    rewrite one (:meth:`rewrite`, raising :class:`Skip` with the reason when it cannot).

    ``report``: a report to append to (a pass in a PassManager hands its findings to the
    caller this way); a fresh one per call otherwise. ``progress(done, total)``: called every
    1000 visited nodes and at the end.
    """

    def __init__(
        self, *, report: RewriteReport | None = None, progress: Progress | None = None
    ) -> None:
        super().__init__()
        self.report = report
        self.progress = progress

    def requires(self, model: ir.Model) -> None:
        """A rewrite reads Q/DQ by the opsets quantgraph knows, and asks onnx's shape inference
        about graphs that already hold spec ops (their schemas must be registered)."""
        supported_opset(model)
        schemas_registered()

    # The op types :meth:`matches` can accept (None: any); nodes of others are not asked (a
    # set lookup where a call costs ~0.5 µs, paid by every pass on every node).
    op_types: frozenset[str] | None = None

    def matches(self, node: ir.Node) -> bool:
        raise NotImplementedError

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        """Rewrite ``node`` in place: its new op type and a detail for the report, or None
        when it had nothing to change."""
        raise NotImplementedError

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        """After every node: opset imports and the like."""

    def call(self, model: ir.Model) -> RewriteResult:
        self.stale: list[ir.Value | None] = []  # former inputs, swept once at the end
        report = self.report if self.report is not None else RewriteReport()
        converted_before = len(report.converted_nodes)
        # The count for progress is taken before any rewrite, then (only when a node matches:
        # most passes find nothing to rewrite in most models) a snapshot of each graph (nodes a
        # rewrite inserts are not visited) and the names in use; each node is asked again when
        # visited.
        graphs = list(all_graphs(model))
        ops, matches = self.op_types, self.matches
        if ops is None:
            total = sum(1 for graph in graphs for n in graph if matches(n))
        else:
            total = sum(1 for graph in graphs for n in graph if n.op_type in ops and matches(n))
        snapshots = [(graph, list(graph)) for graph in graphs] if total else []
        names: Names | None = None
        done = 0
        for graph, nodes in snapshots:
            if names is None:
                names = Names.of(model)
            factory = ConstantFactory(graph, graph is model.graph, names)
            where = "" if graph is model.graph else (graph.name or "")
            for node in nodes:
                if (ops is not None and node.op_type not in ops) or not matches(node):
                    continue
                done += 1
                if self.progress is not None and (done % 1000 == 0 or done == total):
                    self.progress(done, total)
                op_type = node.op_type  # the rewrite changes the node in place
                try:
                    outcome = self.rewrite(model, graph, node, factory)
                except Skip as skip:
                    report.skipped.append(
                        SkippedNode(
                            node.name or "",
                            op_type,
                            str(skip),
                            where,
                            skip.code,
                            skip.node if skip.node is not None else node,
                        )
                    )
                    continue
                if outcome is None:
                    continue
                new_op, detail = outcome
                report.converted_nodes.append(
                    ConvertedNode(node.name or "", op_type, new_op, detail, where)
                )
        self.finish(model, report)
        remove_if_unused(self.stale)
        modified = len(report.converted_nodes) > converted_before
        return RewriteResult(model, modified=modified, report=report)


def import_spec_domain(model: ir.Model, report: RewriteReport, op_types: Collection[str]) -> None:
    """The spec ops' domain imported by the model, and by each function holding a spec op, once
    a pass converted any node of ``op_types`` into spec ops (a pass's ``finish``)."""
    if not any(n.op_type in op_types for n in report.converted_nodes):
        return
    model.opset_imports.setdefault(DOMAIN, OPSET_VERSION)
    for function in model.functions.values():
        if any(n.domain == DOMAIN for n in function):
            function.opset_imports.setdefault(DOMAIN, OPSET_VERSION)
