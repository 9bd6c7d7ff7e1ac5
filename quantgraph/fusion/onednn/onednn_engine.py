"""The oneDNN engine: oneDNN Graph itself decides which spec ops and compute run as one
partition, as PyTorch's oneDNN fuser asks it.

The main graph goes to the loaded oneDNN as one description (:mod:`.onednn_translate`:
static Quantize/Dequantize, compute it has ops for, Wildcards elsewhere); oneDNN returns its
partitions (``QuantgraphOnednnPartitions``). A partition becomes a unit when it holds at least
one spec op and one compute op, and oneDNN compiles it (``QuantgraphOnednnCompile``, unknown
input dims as 1; otherwise its reason is the plan's). Each unit is replaced in
the session's private copy by one ``com.quantgraph.OneDnnPartition`` node carrying the
partition's description; libquantgraph_onednn compiles it per input shape and runs it. Every
other spec op stays and runs on the session's backend, with the reason in the plan.

A partition never computes what the spec would not: per-channel non-zero zero points (which
oneDNN v3.2 collapses to zps[0]) and non-zero weight zero points keep their spec op out of
every partition (:mod:`.onednn_translate`). oneDNN's fused requantization rounds as oneDNN does
(``rne(x * (1/s) + zp)``), so a fused output may be one quantization step off the spec's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ...errors import BackendError
from ...ir.walk import all_graphs, spec_op
from ..plan import ONEDNN, FusionPlan, LeftAlone, Unit
from . import onednn_description as description
from . import onednn_layout, onednn_library, onednn_shapes
from .onednn_translate import COMPUTE, SATURATES, SPEC, Translation, key, translate

PARTITION_OP = "OneDnnPartition"
PARTITION_DOMAIN = "com.quantgraph.onednn"  # its own domain: see register()
OPS_KEY = "quantgraph.onednn.ops"  # session config entry read by libquantgraph_onednn
# Metadata of each OneDnnPartition node: JSON {"compute": name, "inputs"/"outputs": [[the name
# the tensor has in the unfused graph, described NHWC], ...]}. Channels-last chains lose those
# names (cancelled Transposes); validation needs them to feed and check one partition alone.
NAMES_KEY = "quantgraph.onednn.names"
SUBGRAPH = "inside a subgraph or function: fusion 'onednn' plans the main graph only"
NO_PARTITION = "oneDNN put it in no partition with compute"
# oneDNN v3.7-v3.13 fuse 4-bit weights in one pattern only (quantized_gated_mlp); there is no
# dequantize -> MatMul weight-decompression pattern of its own.
FOUR_BIT = (
    "oneDNN put it in no partition with compute: oneDNN Graph fuses 4-bit weights only in its "
    "gated-MLP pattern (three dequantize -> MatMul with SiLU, v3.7+), with f32 activations "
    "from v3.10"
)
# Measured with oneDNN v3.13.2 on an AVX2 CPU (ONEDNN_VERBOSE=all): its quantized gated-MLP
# partition lowers each DynamicDequantize into its MatMul as grouped weight scales, and the CPU
# matmul takes f32 x s4/u4 with grouped scales (weight decompression) only in fpmath mode with
# apply_to_int (src/cpu/x64/matmul/brgemm_matmul_utils.cpp): libquantgraph_onednn sets it on
# graphs with constant 4-bit weights (v3.7+; graph.cc), and the partitions compile and agree
# with MatMulNBits at accuracy_level 0 within 1.7e-6 (logits up to 4.3). Without it every matmul
# refused ("unsupported scales configuration"); before v3.10 f32 activations have no such
# kernel on AVX2/AVX-512.
WEIGHT_DECOMPRESSION = (
    "oneDNN v{version} forms its quantized gated-MLP partition but cannot compile it: f32 "
    "activations with {dtype} weights and grouped scales need oneDNN's weight decompression "
    "(fpmath mode strict with apply_to_int, which quantgraph sets on such graphs; CPU kernels "
    "for f32 activations from v3.10); oneDNN said: {why}"
)
MAIN_KINDS = ("Convolution", "MatMul")
# Describe convolution partitions channels-last where their activations allow it (see
# onednn_layout): oneDNN's int8 convolutions reorder NCX data on every call.
CHANNELS_LAST = True
S8_CONV = (
    "s8 activations into an int8 convolution on this CPU (no VNNI): oneDNN v3.2's result "
    "differs from its unfused composition by up to 6 quantization steps (measured), so the "
    "partition is not formed"
)
ALSO_ALONE = "fused into a partition for some consumers, runs here for the others"


@dataclass(frozen=True)
class Candidate:
    """A partition oneDNN formed that holds spec ops and compute: what a rule decides on."""

    ops: tuple[description.Op, ...]
    text: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    compute: ir.Node
    spec_nodes: tuple[ir.Node, ...]
    weight_dtypes: tuple[str, ...]  # dtypes of constant quantized weights
    rows: int | None  # M of a MatMul (product of the activation's leading dims), if known
    nhwc: frozenset[int] = frozenset()  # activations described channels-last (NXC)
    note: str = ""  # what the user should know about its arithmetic

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(o.kind for o in self.ops)

    @property
    def kernel(self) -> str:
        counts = Counter(self.kinds)
        listed = ", ".join(
            f"{kind} x{counts[kind]}" if counts[kind] > 1 else kind for kind in counts
        )
        return f"oneDNN partition: {listed}" + (" (NXC)" if self.nhwc else "")


# A rule: (engine, reason) for a candidate; None -> oneDNN.
Rule = Callable[[Candidate], tuple[str, str]]


def plan(model: ir.Model) -> FusionPlan:
    """The plan for ``model`` (spec ops), carried out in place: each unit oneDNN forms
    replaced by one OneDnnPartition node (whatever the session's optimization level: a
    partition runs in its own kernel)."""
    return plan_with_rule(model, None)[0]


def plan_with_rule(model: ir.Model, rule: Rule | None) -> tuple[FusionPlan, dict[str, str]]:
    """:func:`plan`, where ``rule`` may give a unit to another engine: the plan of what stays
    with oneDNN, and {compute node: why} of the units given away (their spec ops stay)."""
    from ...backends import onednn

    found = FusionPlan(ONEDNN)
    deferred: dict[str, str] = {}
    spec = [(g, n) for g in all_graphs(model) for n in g if spec_op(n) is not None]
    if not spec:
        return found, deferred
    for graph, node in spec:
        if graph is not model.graph:
            found.alone.append(
                LeftAlone(node.name or key(node), node.op_type, SUBGRAPH, _where(graph))
            )
    onednn_shapes.infer(model)
    translation = translate(
        model, onednn.version_tuple(), int8_saturates=onednn_library.int8_saturates()
    )
    whole = description.text(
        sorted(translation.tensors.values(), key=lambda t: t.id), translation.ops
    )
    try:
        parts = onednn_library.partitions(whole)
    except BackendError as error:
        for _, node in spec:
            if node.graph is model.graph:
                found.alone.append(_alone(node, str(error)))
        return found, deferred
    reasons = dict(translation.reasons)
    chosen: list[Candidate] = []
    for part in parts:
        candidate = _candidate(translation, part, reasons)
        if candidate is None:
            continue
        engine, why = rule(candidate) if rule is not None else (ONEDNN, "")
        if engine != ONEDNN:
            for node in candidate.spec_nodes:
                reasons[key(node)] = f"fusion 'auto' gives it to {engine}: {why}"
            deferred[candidate.compute.name or key(candidate.compute)] = why
            continue
        chosen.append(candidate)
        found.units.append(
            Unit(
                compute=candidate.compute.name or key(candidate.compute),
                op_type=candidate.compute.op_type,
                nodes=tuple(n.name or key(n) for n in candidate.spec_nodes),
                engine=ONEDNN,
                kernel=candidate.kernel,
                reason="; ".join(r for r in (why, candidate.note) if r),
            )
        )
    fused = {key(n) for c in chosen for n in c.spec_nodes}
    for _, node in spec:
        if node.graph is model.graph and key(node) not in fused:
            found.alone.append(_alone(node, reasons.get(key(node)) or _no_partition(node)))
    replaced: dict[int, ir.Value] = {}  # id(old value) -> the value that took its place
    for index, candidate in enumerate(chosen):
        _replace(model, translation, candidate, index, replaced)
        model.opset_imports[PARTITION_DOMAIN] = 1
    if chosen:
        _remove_dead(model, translation)
        model.graph.sort()
        onednn_layout.cancel(model.graph)
    for _, node in spec:  # fused for some consumers, still read by others
        if node.graph is model.graph and key(node) in fused:
            found.alone.append(_alone(node, ALSO_ALONE))
    return found, deferred


def register(options: ort.SessionOptions, *, partitions_only: bool = True) -> None:
    """Register the OneDnnPartition kernel (libquantgraph_onednn) in ``options``.

    onnxruntime refuses two libraries registering one domain, so the op has its own
    (com.quantgraph.onednn) and, with ``partitions_only`` (another backend's library has
    com.quantgraph), the library registers only that one."""
    from ...backends import onednn

    if partitions_only:
        options.add_session_config_entry(OPS_KEY, "partition")
    onednn.load()
    options.register_custom_ops_library(str(onednn.kernels_path()))


def _candidate(
    translation: Translation, part: onednn_library.Partition, reasons: dict[str, str]
) -> Candidate | None:
    roles = [translation.roles.get(i) for i in part.ops]
    if not part.supported or SPEC not in roles or COMPUTE not in roles:
        return None
    if any(r not in (SPEC, COMPUTE) for r in roles):
        return None
    by_id = {o.id: o for o in translation.ops}
    ops = tuple(by_id[i] for i in sorted(part.ops))
    inside = set(part.ops)
    produced = {t for o in ops for t in o.outputs}
    inputs = tuple(dict.fromkeys(t for o in ops for t in o.inputs if t not in produced))
    # Every reader of a tensor is an op of the description (Wildcards and the graph outputs'
    # End included), so what ops outside the partition read is what it must return.
    read_outside = {t for o in translation.ops if o.id not in inside for t in o.inputs}
    outputs = tuple(t for o in ops for t in o.outputs if t in read_outside)
    used = sorted({*inputs, *produced})
    text = description.text([translation.tensors[t] for t in used], ops, inputs, outputs)
    spec_nodes = [translation.nodes[o.id] for o in ops if translation.roles[o.id] == SPEC]
    spec_nodes += [
        translation.folded_nodes[t]
        for t in inputs
        if t in translation.folded_nodes and spec_op(translation.folded_nodes[t]) is not None
    ]
    computes = [o for o in ops if translation.roles[o.id] == COMPUTE]
    main = next((o for o in computes if o.kind in MAIN_KINDS), computes[0])
    if (
        onednn_library.int8_saturates()
        and "Convolution" in (o.kind for o in ops)
        and any(_dequantizes(translation, o, "s8", const=False) for o in ops)
    ):
        for node in spec_nodes:
            reasons[key(node)] = S8_CONV
        return None
    nhwc: set[int] = set()
    last = onednn_layout.channels_last(translation.tensors, ops) if CHANNELS_LAST else None
    last_text = None if last is None else onednn_layout.text(last[0], last[1], inputs, outputs)
    if last is not None and last_text is not None and _compile_reason(last_text, inputs) is None:
        text, nhwc = last_text, last[2]
    else:
        why = _compile_reason(text, inputs)
        if why is not None:
            because = _decompression_reason(translation, ops, why)
            for node in spec_nodes:
                reasons[key(node)] = because or f"oneDNN cannot compile its partition: {why}"
            return None
    weights = tuple(
        translation.tensors[o.inputs[0]].dtype
        for o in ops
        if o.kind in ("Dequantize", "DynamicDequantize") and translation.tensors[o.inputs[0]].const
    )
    return Candidate(
        ops=ops,
        text=text,
        inputs=inputs,
        outputs=outputs,
        compute=translation.nodes[main.id],
        spec_nodes=tuple(spec_nodes),
        weight_dtypes=weights,
        rows=_rows(translation, main),
        nhwc=frozenset(nhwc),
        note=SATURATES if any(o.id in translation.wide_weights for o in ops) else "",
    )


def _compile_reason(text: str, inputs: tuple[int, ...]) -> str | None:
    """Why oneDNN cannot compile the partition ``text`` describes, None when it can.

    An input's unknown dims (a symbolic batch or sequence) are compiled as 1: what oneDNN
    refuses (a data type or quantization oneDNN has no kernel for on this CPU, e.g. v3.13's
    int4 MatMul on AVX2) it refuses whatever the sizes, and a partition that fails to compile
    at its first run could no longer fall back. Inputs of unknown rank are not compiled."""
    probe = description.with_input_dims(text, inputs, 1)
    if probe is None:
        return None
    why = onednn_library.compile_reason(probe)
    if why is not None and probe != text:
        why += " (compiled with the inputs' unknown dims as 1)"
    return why


def _decompression_reason(
    translation: Translation, ops: tuple[description.Op, ...], why: str
) -> str | None:
    """The plan's reason when a refused partition MatMuls f32 activations with a dequantized
    constant 4-bit weight (weight decompression), else None."""
    from ...backends import onednn

    produced = {t: o for o in ops for t in o.outputs}
    for op in ops:
        if op.kind != "MatMul" or len(op.inputs) < 2:
            continue
        weight = produced.get(op.inputs[1])
        if weight is None or weight.kind != "DynamicDequantize":
            continue
        source = translation.tensors[weight.inputs[0]]
        activation = translation.tensors[op.inputs[0]]
        if source.const and source.dtype in ("s4", "u4") and activation.dtype == "f32":
            version = ".".join(map(str, onednn.version_tuple()))
            return WEIGHT_DECOMPRESSION.format(version=version, dtype=source.dtype, why=why)
    return None


def _dequantizes(translation: Translation, op: description.Op, dtype: str, *, const: bool) -> bool:
    """``op`` dequantizes a ``dtype`` tensor that is (``const``) or is not a constant."""
    if op.kind not in ("Dequantize", "DynamicDequantize"):
        return False
    source = translation.tensors[op.inputs[0]]
    return source.dtype == dtype and source.const == const


def _rows(translation: Translation, op: description.Op) -> int | None:
    if op.kind != "MatMul":
        return None
    dims = translation.tensors[op.inputs[0]].dims
    if dims is None or any(d is None for d in dims[:-1]):
        return None
    return int(np.prod([d for d in dims[:-1] if d is not None]))


def _replace(
    model: ir.Model,
    translation: Translation,
    candidate: Candidate,
    index: int,
    replaced: dict[int, ir.Value],
) -> None:
    """``candidate``'s ops replaced by one OneDnnPartition node (``replaced``: values earlier
    partitions took the place of, updated)."""
    graph = model.graph
    inputs = []
    for t in candidate.inputs:
        if t in candidate.nhwc:
            source = _current(translation.values[t], replaced)
            inputs.append(
                onednn_layout.transpose(
                    graph, source, onednn_layout.TO_NHWC, f"{source.name}_nhwc_{index}"
                )
            )
        elif t in translation.folded:
            name = f"{translation.values[t].name}_onednn_f32_{index}"
            value = ir.Value(name=name, const_value=ir.tensor(translation.folded[t], name=name))
            value.type = ir.TensorType(ir.DataType.FLOAT)
            value.shape = ir.Shape(list(translation.folded[t].shape))
            graph.register_initializer(value)
            inputs.append(value)
        else:
            inputs.append(_current(translation.values[t], replaced))
    old_values = [translation.values[t] for t in candidate.outputs]
    node = ir.Node(
        PARTITION_DOMAIN,
        PARTITION_OP,
        inputs,
        attributes=[ir.AttrString("description", candidate.text)],
        num_outputs=len(old_values),
        name=f"onednn_partition_{index}_{candidate.compute.name or index}",
    )

    def named(tensors: tuple[int, ...]) -> list[tuple[str | None, bool]]:
        return [(translation.values[t].name, t in candidate.nhwc) for t in tensors]

    compute = candidate.compute.name or key(candidate.compute)
    node.metadata_props[NAMES_KEY] = json.dumps(
        {"compute": compute, "inputs": named(candidate.inputs), "outputs": named(candidate.outputs)}
    )
    # A Dequantize copied per consumer stays while a consumer outside still reads it.
    old_nodes = [translation.nodes[o.id] for o in candidate.ops if o.id not in translation.copies]
    new_values = list(node.outputs)
    for position, t in enumerate(candidate.outputs):
        if t in candidate.nhwc:
            made = node.outputs[position]
            made.name = f"{old_values[position].name}_nhwc_{index}"
            made.type = old_values[position].type
            new_values[position] = onednn_layout.transpose(
                graph, made, onednn_layout.TO_NCHW, f"{old_values[position].name}_nchw_{index}"
            )
    ir.convenience.replace_nodes_and_values(
        graph, old_nodes[-1], old_nodes, [node], old_values, new_values
    )
    replaced.update((id(old), new) for old, new in zip(old_values, new_values, strict=True))


def _current(value: ir.Value, replaced: dict[int, ir.Value]) -> ir.Value:
    return replaced.get(id(value), value)


def _remove_dead(model: ir.Model, translation: Translation) -> None:
    """Folded bias dequantizes and copied Dequantizes that nothing reads any more."""
    graph = model.graph
    copied = [translation.nodes[i] for i in translation.copies]
    for node in {id(n): n for n in [*translation.folded_nodes.values(), *copied]}.values():
        if node.graph is graph and not any(v.uses() or v.is_graph_output() for v in node.outputs):
            graph.remove(node, safe=True)


def _no_partition(node: ir.Node) -> str:
    """Why oneDNN put ``node`` in no partition, where its own answer says nothing more."""
    source = node.inputs[0] if node.inputs else None
    dtype = None if source is None or source.type is None else source.type.dtype
    if dtype in (ir.DataType.INT4, ir.DataType.UINT4):
        return FOUR_BIT
    return NO_PARTITION


def _alone(node: ir.Node, reason: str) -> LeftAlone:
    return LeftAlone(node.name or key(node), node.op_type, reason, "")


def _where(graph: object) -> str:
    return str(getattr(graph, "name", "") or "")
