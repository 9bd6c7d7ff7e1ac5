"""The error each quantized compute node introduces by itself: its quantized weights.

In a QDQ model run unfused, every operator computes in float; error enters only at each
activation's Q->DQ pair (measured per tensor in :mod:`.qparams`) and at each constant the
node reads through a DequantizeLinear (weights, bias). A node's own error is the second: the
node with its DQ'd constants fed the *float model's* values of its inputs (so nothing upstream
is inherited), its output through the output's Q->DQ pair when it has one, against the float
model's output through that same pair (so the pair, and a Relu quantize_static folded into its
clamp, count on both sides). The two kinds of figures partition the sources of error.

One ONNX model holds a copy of every such node (outputs renamed), so one session and one run
per sample measure them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from ...backends.ort_sessions import ort_session
from ...ir.names import Names
from .qparams import COARSE, LEVELS_UNDER, sqnr
from .quantized_units import units

_DOMAINS = ("", "ai.onnx", "com.microsoft")
_SUFFIX = "::qg_debug"


@dataclass
class NodeQuantization:
    """One compute node reading DQ'd constants: the error its own quantization introduces."""

    node: str
    op_type: str
    output: str
    constants: list[str]  # the DQ'd constants it reads (quantized initializer names)
    weight_levels: float | None = None  # fewest integer levels a weight channel spans
    signal: float = 0.0
    noise: float = 0.0

    @property
    def sqnr_db(self) -> float:
        return sqnr(self.signal, self.noise)

    @property
    def reason(self) -> str | None:
        if self.noise == 0.0 or self.weight_levels is None:
            return None
        return COARSE if self.weight_levels < LEVELS_UNDER else None

    def to_dict(self) -> dict[str, object]:
        sqnr_db = self.sqnr_db
        return {
            "node": self.node,
            "op_type": self.op_type,
            "output": self.output,
            "constants": list(self.constants),
            "weight_levels": self.weight_levels,
            "sqnr_db": None if math.isinf(sqnr_db) else round(sqnr_db, 3),
            "reason": self.reason,
        }


def _is(node: onnx.NodeProto | None, op_type: str) -> bool:
    return node is not None and node.op_type == op_type and node.domain in _DOMAINS


class NodeModel:
    """The combined model of every measurable node of a QDQ model (see the module doc)."""

    def __init__(self, qdq: ir.Model, known: set[str]) -> None:
        proto = ir.to_proto(qdq)
        graph = proto.graph
        made = {o: n for n in graph.node for o in n.output if o}
        consts = {t.name for t in graph.initializer} - {i.name for i in graph.input}
        consts |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
        readers: dict[str, list[onnx.NodeProto]] = {}
        for n in graph.node:
            for name in n.input:
                readers.setdefault(name, []).append(n)
        self.nodes: list[NodeQuantization] = []
        self.fed: list[str] = []  # float tensors the combined model reads
        self.pairs: list[tuple[str, str]] = []  # (quantized output, reference output)
        copied: list[onnx.NodeProto] = []
        constant_nodes: dict[str, onnx.NodeProto] = {}
        used: set[str] = set()
        names = Names.of_proto(proto)  # every copy's node and output names are new ones

        def constant(name: str) -> None:
            used.add(name)
            if name in made and made[name].op_type == "Constant":
                constant_nodes[name] = made[name]

        for node in graph.node:
            if node.op_type in ("QuantizeLinear", "DequantizeLinear", "Constant"):
                continue
            if any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in node.attribute
            ):
                continue
            out = node.output[0] if node.output else ""
            pair = _output_pair(out, readers) if out else None
            # quantize_static renames a graph output's producer: the float name is the DQ's
            reference_name = out if out in known or pair is None else pair[1].output[0]
            if not out or reference_name not in known:
                continue
            dq_consts = [
                made[i]
                for i in node.input
                if _is(made.get(i), "DequantizeLinear") and made[i].input[0] in consts
            ]
            if not dq_consts:
                continue
            inputs: list[str] = []
            mine: list[onnx.NodeProto] = []
            copies: dict[str, str] = {}  # a DQ'd constant read twice is copied once
            ok = True
            for name in node.input:
                producer = made.get(name)
                if not name or name in consts:
                    if name:
                        constant(name)
                    inputs.append(name)
                elif producer is not None and producer in dq_consts:
                    if name not in copies:
                        copy = _copy(producer, names)
                        for i in copy.input:
                            if i:
                                constant(i)
                        mine.append(copy)
                        copies[name] = copy.output[0]
                    inputs.append(copies[name])
                else:
                    source = _pair_source(name, made)
                    feed = source if source is not None else name
                    if feed not in known:
                        ok = False
                        break
                    inputs.append(feed)
                    if feed not in self.fed:
                        self.fed.append(feed)
            if not ok:
                continue
            copy = _copy(node, names)
            del copy.input[:]
            copy.input.extend(inputs)
            mine.append(copy)
            quantized, reference = copy.output[0], reference_name
            if pair is not None:
                if reference_name not in self.fed:
                    self.fed.append(reference_name)
                for side, source_name in (("q", quantized), ("f", reference_name)):
                    for step in pair:
                        step_copy = _copy(step, names)
                        step_copy.input[0] = source_name
                        for i in step_copy.input[1:]:
                            if i:
                                constant(i)
                        mine.append(step_copy)
                        source_name = step_copy.output[0]
                    if side == "q":
                        quantized = source_name
                    else:
                        reference = source_name
            elif out not in self.fed:
                self.fed.append(out)  # the reference is the float output itself
            copied.extend(mine)
            self.pairs.append((quantized, reference))
            read = [n.input[0] for n in dq_consts]
            self.nodes.append(
                NodeQuantization(node.name or "", node.op_type, out, read, _levels(dq_consts, qdq))
            )
        measured = {output for pair in self.pairs for output in pair} | set(self.fed)
        for unit in units(graph, known, consts, measured):
            renamed: dict[str, str] = {}
            for step in unit.nodes:
                step_copy = _copy(step, names)
                for k, name in enumerate(step_copy.input):
                    step_copy.input[k] = renamed.get(name, name)
                renamed.update(zip(step.output, step_copy.output, strict=True))
                copied.append(step_copy)
            for name in unit.constants:
                constant(name)
            for name in (*unit.inputs, unit.target):
                if name not in self.fed:
                    self.fed.append(name)
            self.pairs.append((renamed[unit.target], unit.target))
            node = unit.quantized
            read = [n for n in node.input if n in unit.constants]
            self.nodes.append(
                NodeQuantization(
                    node.name or "", node.op_type, unit.target, read, _unit_levels(node, read, qdq)
                )
            )
        initializers = [t for t in graph.initializer if t.name in used]
        outputs = []
        for quantized, reference in self.pairs:
            outputs.append(onnx.helper.make_empty_tensor_value_info(quantized))
            outputs.append(onnx.helper.make_empty_tensor_value_info(reference))
        self.graph_parts = (list(constant_nodes.values()) + copied, initializers, outputs)
        self.proto = proto
        self.qdq = qdq  # where its external weights are read from

    def session(
        self, elem_types: Mapping[str, int], options: ort.SessionOptions
    ) -> ort.InferenceSession:
        nodes, initializers, outputs = self.graph_parts
        inputs = [
            onnx.helper.make_tensor_value_info(name, elem_types[name], None) for name in self.fed
        ]
        # a reference that is fed is read from the feeds, not listed as an output
        graph = onnx.helper.make_graph(nodes, "quantgraph_node_error", inputs, [], initializers)
        seen: set[str] = set(self.fed)
        for info in outputs:
            if info.name not in seen:
                graph.output.append(info)
                seen.add(info.name)
        model = onnx.helper.make_model(
            graph, opset_imports=list(self.proto.opset_import), ir_version=self.proto.ir_version
        )
        model.functions.extend(self.proto.functions)
        return ort_session(model, options, origin=self.qdq)

    def measure(
        self, samples: Sequence[Mapping[str, np.ndarray]], options: ort.SessionOptions
    ) -> list[NodeQuantization]:
        """Run every sample (the float model's values by name) and accumulate each node."""
        if not self.nodes:
            return []
        types = {
            name: onnx.helper.np_dtype_to_tensor_dtype(np.asarray(samples[0][name]).dtype)
            for name in self.fed
        }
        session = self.session(types, options)
        names = [o.name for o in session.get_outputs()]
        for sample in samples:
            feeds = {name: np.asarray(sample[name]) for name in self.fed}
            got = dict(zip(names, session.run(names, feeds), strict=True))
            got.update(feeds)
            for found, (quantized, reference) in zip(self.nodes, self.pairs, strict=True):
                want = np.asarray(got[reference], dtype=np.float64).reshape(-1)
                have = np.asarray(got[quantized], dtype=np.float64).reshape(-1)
                if want.shape != have.shape:
                    continue
                finite = np.isfinite(want) & np.isfinite(have)
                diff = want[finite] - have[finite]
                found.signal += float(np.dot(want[finite], want[finite]))
                found.noise += float(np.dot(diff, diff))
        return self.nodes


def _copy(node: onnx.NodeProto, names: Names) -> onnx.NodeProto:
    """A copy of ``node`` whose name and outputs no other node or value has."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = names.unique(f"{node.name or node.op_type}{_SUFFIX}")
    for k, output in enumerate(copy.output):
        if output:
            copy.output[k] = names.unique(f"{output}{_SUFFIX}")
    return copy


def _pair_source(name: str, made: Mapping[str, onnx.NodeProto]) -> str | None:
    """T when ``name`` is DQ(Q(T))'s output."""
    dq = made.get(name)
    if not _is(dq, "DequantizeLinear") or dq is None:
        return None
    q = made.get(dq.input[0])
    return q.input[0] if _is(q, "QuantizeLinear") and q is not None else None


def _output_pair(
    name: str, readers: Mapping[str, list[onnx.NodeProto]]
) -> tuple[onnx.NodeProto, onnx.NodeProto] | None:
    for q in readers.get(name, []):
        if _is(q, "QuantizeLinear") and q.input[0] == name:
            for dq in readers.get(q.output[0], []):
                if _is(dq, "DequantizeLinear"):
                    return q, dq
    return None


def _levels(dq_consts: Sequence[onnx.NodeProto], qdq: ir.Model) -> float | None:
    """The fewest integer levels any output channel (axis 0) of the node's 8-bit-or-narrower
    weights spans (max - min of the quantized integers); None when there are none."""
    return _constant_levels([dq.input[0] for dq in dq_consts], qdq)


def _unit_levels(node: onnx.NodeProto, read: Sequence[str], qdq: ir.Model) -> float | None:
    """:func:`_levels` of the integer weights a quantized node reads (none for packed
    4-bit weights: their bytes hold two values each)."""
    if node.op_type in ("MatMulNBits", "GatherBlockQuantized"):
        return None
    return _constant_levels(read, qdq)


def _constant_levels(names: Sequence[str], qdq: ir.Model) -> float | None:
    arrays = {t.name: t for t in qdq.graph.initializers.values()}
    fewest: float | None = None
    for name in names:
        value = arrays.get(name)
        if value is None or value.const_value is None:
            continue
        w = value.const_value.numpy()
        if w.dtype.kind not in "iu" or w.dtype.itemsize > 1 or w.ndim < 2:
            continue  # int32 bias is not a weight with levels to speak of
        flat = w.reshape(w.shape[0], -1).astype(np.int64)
        spans = float((flat.max(axis=1) - flat.min(axis=1)).min())
        fewest = spans if fewest is None else min(fewest, spans)
    return fewest
