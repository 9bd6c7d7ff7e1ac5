"""Where oneDNN's partitions part from the spec: each partition alone against the spec's
composition of its ops.

A fused session's outputs can land quantization steps away from the original's, and a step
lost in one partition is an input of every later one. To tell which partition loses what,
each OneDnnPartition node runs alone (a model of that node, its weights as initializers) on
the tensors the spec's composition computed for its inputs (the original at ORT_DISABLE_ALL,
every Q/DQ unfused), and its outputs are compared with that composition's: the difference the
partition *introduces*. The fused run's own values at the same tensors give what it shows end
to end, *inherited* from upstream included. Tensors are matched by the names the original has
(the partition node's metadata keeps them where channels-last chains dropped them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ...backends.ort_sessions import ort_session
from ...fusion.onednn.onednn_engine import NAMES_KEY, PARTITION_DOMAIN, PARTITION_OP, register
from ...fusion.onednn.onednn_layout import TAG, TO_NCHW, TO_NHWC
from ...fusion.plan import ONEDNN, FusionPlan
from ...reference.compare import TensorComparison, compare, merge
from .partition_report import PartitionCheck, PartitionOutput

MISSING = "not checked: the original computes no tensor named {names}"


@dataclass
class _Alone:
    """A partition as a model of its own: fed by the original's names, outputs under them."""

    node: str
    compute: str
    fed: list[str]
    outputs: list[str]
    model: ir.Model  # its weights are the original's tensors (read from the same files)
    session: ort.InferenceSession | None = None
    introduced: dict[str, TensorComparison] = field(default_factory=dict)
    inherited: dict[str, TensorComparison] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


class Partitions:
    """The partitions a fused session runs, collected by :meth:`after_fusion` (the session's
    hook), then checked sample by sample (:meth:`add`)."""

    def __init__(self, expose_all: bool) -> None:
        # fusion "onednn": every tensor the fused graph computes is exposed (what is outside a
        # partition runs alone anyway); "auto" exposes the partitions' outputs only, as
        # exposing a tensor inside one of onnxruntime's fused units would unfuse it.
        self.expose_all = expose_all
        self._units: list[_Alone] = []

    def after_fusion(self, model: ir.Model) -> None:
        """Record each OneDnnPartition node of the planned ``model`` and expose its outputs
        under the original's names (a session re-planned after tuning records anew)."""
        graph = model.graph
        self._units = []
        by_name = {v.name: v for n in graph for v in n.outputs if v.name}
        exposed = {v.name for v in graph.outputs}

        def expose(value: ir.Value) -> None:
            if value.name not in exposed and value.type is not None:
                graph.outputs.append(value)
                exposed.add(value.name)

        nodes = [n for n in graph if n.domain == PARTITION_DOMAIN and n.op_type == PARTITION_OP]
        if self.expose_all:
            for node in graph:
                if node not in nodes and node.metadata_props.get(TAG) != "1":
                    for value in node.outputs:
                        if value.name:
                            expose(value)
        for node in nodes:
            names = json.loads(node.metadata_props[NAMES_KEY])
            self._units.append(_alone(model, node, names))
            for position, (name, _) in enumerate(names["outputs"]):
                found = by_name.get(name)
                if found is None:  # a channels-last chain: its NCHW tensor was cancelled
                    found = _transpose(graph, node.outputs[position], TO_NCHW, name)
                expose(found)

    @property
    def checked(self) -> bool:
        return bool(self._units)

    @property
    def needed(self) -> list[str]:
        """The original's tensors the partitions read and write."""
        return list(dict.fromkeys(n for u in self._units for n in (*u.fed, *u.outputs)))

    @property
    def outputs(self) -> list[str]:
        """The partitions' outputs, to fetch from the fused run."""
        return list(dict.fromkeys(n for u in self._units for n in u.outputs))

    def run(
        self,
        spec: ort.InferenceSession,
        samples: Sequence[Mapping[str, np.ndarray]],
        fused: Sequence[Mapping[str, np.ndarray]],
    ) -> None:
        """Check every partition on ``samples``: ``spec``, the original at ORT_DISABLE_ALL with
        its tensors exposed; ``fused``, the fused run's tensors on each sample."""
        available = {o.name for o in spec.get_outputs()}
        wanted = [n for n in self.needed if n in available]
        for sample, got in zip(samples, fused, strict=True):
            values = dict(zip(wanted, spec.run(wanted, dict(sample)), strict=True))
            self.add({**sample, **values}, got)

    def add(self, reference: Mapping[str, np.ndarray], fused: Mapping[str, np.ndarray]) -> None:
        """One sample: ``reference``, the spec composition's tensors by name (the original at
        ORT_DISABLE_ALL, its inputs included); ``fused``, the fused run's."""
        for unit in self._units:
            unit.missing = [n for n in (*unit.fed, *unit.outputs) if n not in reference]
            if unit.missing:
                continue
            if unit.session is None:
                unit.session = _session(unit.model, reference)
            got = unit.session.run(unit.outputs, {n: reference[n] for n in unit.fed})
            for name, value in zip(unit.outputs, got, strict=True):
                _merge(unit.introduced, compare(name, reference[name], value))
                if name in fused:
                    _merge(unit.inherited, compare(name, reference[name], fused[name]))

    def checks(self, plan: FusionPlan | None, steps: Mapping[str, float]) -> list[PartitionCheck]:
        """Each partition, in graph order: what it introduces and inherits, in ``steps``."""
        planned = {u.compute: u for u in (plan.units if plan else []) if u.engine == ONEDNN}
        found = []
        for unit in self._units:
            known = planned.get(unit.compute)
            kernel = "oneDNN partition" if known is None else known.kernel
            reason = "" if known is None else known.reason
            if unit.missing or not unit.introduced:
                note = MISSING.format(names=", ".join(f"'{n}'" for n in unit.missing))
                found.append(PartitionCheck(unit.node, unit.compute, kernel, reason, note=note))
                continue
            outputs = tuple(
                PartitionOutput(n, steps.get(n), unit.introduced[n], unit.inherited.get(n))
                for n in unit.outputs
            )
            found.append(PartitionCheck(unit.node, unit.compute, kernel, reason, outputs))
        return found


def _alone(model: ir.Model, node: ir.Node, names: dict[str, Any]) -> _Alone:
    """``node`` as a model of its own whose inputs and outputs are the original's tensors."""
    fed: dict[str, ir.Value] = {}
    initializers: list[ir.Value] = []
    nodes: list[ir.Node] = []
    inputs: list[ir.Value | None] = []
    transposed: dict[str, ir.Value] = {}
    for value, (name, nhwc) in zip(node.inputs, names["inputs"], strict=True):
        assert value is not None
        constant = ir.convenience.get_const_tensor(value)
        if constant is not None:
            copy = ir.Value(name=value.name, type=value.type, shape=value.shape)
            copy.const_value = constant
            initializers.append(copy)
            inputs.append(copy)
            continue
        source = fed.setdefault(name, ir.Value(name=name, type=value.type))
        if nhwc:
            if name not in transposed:
                transposed[name] = _transpose(None, source, TO_NHWC, f"{name}_nhwc", nodes)
            source = transposed[name]
        inputs.append(source)
    description = node.attributes["description"].as_string()
    alone = ir.Node(
        PARTITION_DOMAIN,
        PARTITION_OP,
        inputs,
        attributes=[ir.AttrString("description", description)],
        num_outputs=len(node.outputs),
        name=node.name,
    )
    nodes.append(alone)
    outputs = []
    for made, was, (name, nhwc) in zip(alone.outputs, node.outputs, names["outputs"], strict=True):
        made.type = was.type
        made.name = f"{name}_nhwc" if nhwc else name
        outputs.append(_transpose(None, made, TO_NCHW, name, nodes) if nhwc else made)
    graph = ir.Graph(
        list(fed.values()),
        outputs,
        nodes=nodes,
        initializers=initializers,
        opset_imports={"": model.opset_imports.get("", 17), PARTITION_DOMAIN: 1},
        name=node.name or "partition",
    )
    return _Alone(
        node.name or "",
        str(names["compute"]),
        list(fed),
        [o.name or "" for o in outputs],
        ir.Model(graph, ir_version=model.ir_version),
    )


def _transpose(
    graph: ir.Graph | None,
    value: ir.Value,
    order: tuple[int, ...],
    name: str,
    nodes: list[ir.Node] | None = None,
) -> ir.Value:
    """A Transpose of ``value`` named ``name``, appended to ``graph`` or to ``nodes``."""
    node = ir.Node("", "Transpose", [value], attributes=[ir.AttrInt64s("perm", list(order))])
    node.name = name
    out = node.outputs[0]
    out.name = name
    out.type = value.type
    if graph is not None:
        graph.append(node)
    if nodes is not None:
        nodes.append(node)
    return out


def _session(model: ir.Model, reference: Mapping[str, np.ndarray]) -> ort.InferenceSession:
    """A session of a partition alone, its inputs declared in the shapes of ``reference`` (the
    kernel compiles at load for declared shapes, and again for any other it meets)."""
    for value in model.graph.inputs:
        value.shape = ir.Shape(np.shape(reference[value.name or ""]))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    register(options)
    return ort_session(model, options)


def _merge(found: dict[str, TensorComparison], one: TensorComparison) -> None:
    earlier = found.get(one.name)
    found[one.name] = one if earlier is None else merge(earlier, one)
