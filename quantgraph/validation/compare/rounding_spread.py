"""A bound the model itself gives, for a comparison that cannot be exact: how far the reference
moves when the arithmetic it shares with the rewritten model is rounded otherwise.

Where the two sides compute one function with other roundings (float32 sums in another order,
or in float32 where the original sums exactly in int32; a float16 weight the spec form rounds
and onnxruntime does not; a requantization rounded by another kernel), the outputs differ by
that rounding carried through the rest of the model. A model that requantizes its activations
(quantize_dynamic's DynamicQuantizeLinear, QOperator's kernels) turns a rounding at a value near
a .5 tie into a whole quantization step, and every later layer carries it on: on a 6-layer
quantize_dynamic encoder (hidden 64, outputs of magnitude ~3) the rewritten model was up to 0.08
from the original, as far as onnxruntime's own ORT_DISABLE_ALL and ORT_ENABLE_ALL runs of the
original are from each other (up to 0.07), where the sums differ by ~1e-7. A fixed tolerance
fits no such model; so the model gives the bound. Not onnxruntime's level spread alone: on a
sample where none of its fused kernels met a tie it was 1e-6 while the rewritten model was 0.064
away; noise at every place the arithmetics differ meets ties on every sample.

A copy of the reference gets noise of the size of that rounding at each place the arithmetics
differ (a :class:`Site`), switched on by one boolean input it gains, and runs :data:`RUNS` times
per sample with the noise on (onnxruntime's RandomUniformLike, seeded: the same draws in every
process). Each output's spread is the largest distance of those runs from the run without noise;
its bound is :data:`FACTOR` times that (the rewritten model is one more draw of the same kind of
difference: on 6-layer quantize_dynamic encoders, hidden 64-128, s8 and u8 weights, 40 samples,
its distance was at most 1.11 times the spread of 3 runs), and never less than one quantization
step where the output is dequantized with one scale (a tie at the last requantizer). A
corrupted weight or scale moves outputs further: a weight scale of one layer doubled moved that
encoder's outputs by 0.7, 4-10 times the bound.

The noise, per element of a site's tensor y (r uniform in [-1, 1]; eps the unit roundoff of the
type the value is computed in, 2^-24 for float32, 2^-11 for float16):

* a sum of K products in float32 (MatMulNBits, quantize_dynamic's MatMulInteger / ConvInteger
  and their scale chain): y + (eps + (K - 1) 2^-24) max|y| r, eps of y's type (K unknown, two
  activations along a symbolic dim: :data:`UNKNOWN_TERMS`). Two orders of a float32 sum are at
  most 2 (K - 1) 2^-24 sum|a w| apart (max|y| stands for the scale of sum|a w|), and a float16
  result or weight is rounded once more (float16 MatMulNBits: measured 1-2 float16 steps of
  max|y| apart).
* a float16 weight the spec form rounds (Cast -> Mul chains): y * (1 + 2^-11 r).
* a requantizing QOperator node: its output scale times (1 + K 2^-24 r), at least 2^-20 for
  the elementwise ones: values at a tie land a step apart, as another kernel's rounding puts
  them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from ...ir.values import value_shape
from ...ir.walk import all_graphs, proto_graphs
from ...passes.contrib.matmul_nbits import RECORD as NBITS_RECORD
from ...passes.integer.integer_ops import RECORD as INTEGER_RECORD
from ...passes.integer.qoperator import Form, form_of
from ...passes.qdq.cast_scale import RECORD as CAST_RECORD
from ...reference.compare import typed

RUNS = 3  # noisy runs per sample
FACTOR = 2.0  # the bound, in spreads
# the unit roundoff of each float type a site's value has
EPS: dict[int, float] = {
    int(TensorProto.FLOAT): 2.0**-24,
    int(TensorProto.FLOAT16): 2.0**-11,
    int(TensorProto.BFLOAT16): 2.0**-8,
}
REQUANTIZATION_FLOOR = 2.0**-20
# K where neither a weight nor shape inference says it (two activations multiplied along a
# symbolic dim): sized as a sum of this many products, generous for attention's head and
# sequence lengths.
UNKNOWN_TERMS = 1024
SUM, ROUNDING, REQUANTIZATION = "sum", "rounding", "requantization"
SWITCH = "quantgraph_rounding_noise"  # the boolean input that switches the noise on


@dataclass(frozen=True)
class Site:
    """One place the two arithmetics differ: the original's ``node``, the tensor that gets the
    noise (its output; a QOperator node's output scale), the kind and the noise's size."""

    node: str
    tensor: str
    kind: str
    noise: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class SpreadBound:
    """Each output's spread and bound (see the module's doc)."""

    sites: list[Site]
    runs: int
    samples: int
    spread: dict[str, float] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)  # output -> one quantization step

    def atol(self, name: str) -> float:
        return max(FACTOR * self.spread.get(name, 0.0), self.steps.get(name, 0.0))

    def rule(self) -> str:
        kinds = sorted({s.kind for s in self.sites})
        where = f"{len(self.sites)} place(s) where the arithmetics differ ({', '.join(kinds)})"
        return (
            f"per output, {FACTOR:g} x the reference's own spread: the largest distance it moved "
            f"in {self.runs} runs per sample with noise of the size of the rounding at {where}, "
            "at least one quantization step where the output is dequantized with one scale"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule(),
            "factor": FACTOR,
            "runs": self.runs,
            "samples": self.samples,
            "sites": [s.to_dict() for s in self.sites],
            "outputs": {
                name: {
                    "spread": _finite(value),
                    "step": self.steps.get(name),
                    "atol": _finite(self.atol(name)),
                }
                for name, value in self.spread.items()
            },
        }


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def sites(
    original: onnx.ModelProto,
    rewritten: ir.Model,
    integer: bool,
    kernels: Sequence[str],
    qoperator: bool,
) -> list[Site]:
    """Where the reference (``original``, serialized) and ``rewritten`` compute otherwise: the
    outputs the converted integer-op chains, MatMulNBits and float16 Cast chains keep the
    original's names of (their records say which), and each QOperator node the rewritten model
    no longer has (``integer``, ``kernels``, ``qoperator``: what the comparison found)."""
    graphs = list(proto_graphs(original.graph))
    made = {o: n for g in graphs for n in g.node for o in n.output if o}
    dims = {t.name: list(t.dims) for g in graphs for t in g.initializer}
    types = {t.name: t.data_type for g in graphs for t in g.initializer}
    found: list[Site] = []
    wanted = {INTEGER_RECORD} if integer else set()
    if kernels:
        wanted |= {NBITS_RECORD, CAST_RECORD}
    for graph in all_graphs(rewritten):
        for node in graph:
            record = next((r for r in wanted if r in node.metadata_props), None)
            name = node.outputs[0].name if node.outputs else None
            source = made.get(name or "")
            if record is None or source is None or name is None:
                continue
            if record == CAST_RECORD:
                cast = json.loads(node.metadata_props[CAST_RECORD])["cast"][2]
                if dict((k, v) for k, v in cast).get("to") == TensorProto.FLOAT16:
                    found.append(Site(source.name, name, ROUNDING, EPS[TensorProto.FLOAT16]))
                continue
            terms, elem = _summed(source, made, dims, types)
            terms = terms if terms > 1 else _rewritten_terms(node) or UNKNOWN_TERMS
            noise = EPS.get(elem, EPS[TensorProto.FLOAT]) + (terms - 1) * EPS[TensorProto.FLOAT]
            found.append(Site(source.name, name, SUM, noise))
    kept = {(n.domain, n.op_type) for g in all_graphs(rewritten) for n in g}
    for graph in graphs if qoperator else []:
        for node in graph.node:
            form = form_of_proto(node)
            if form is None or form.output is None or (node.domain, node.op_type) in kept:
                continue
            scale = node.input[form.output[0]] if len(node.input) > form.output[0] else ""
            if scale:
                noise = max(_terms(node, dims) * EPS[TensorProto.FLOAT], REQUANTIZATION_FLOOR)
                found.append(Site(node.name, scale, REQUANTIZATION, noise))
    return found


def form_of_proto(node: onnx.NodeProto) -> Form | None:
    """:func:`quantgraph.passes.integer.qoperator.form_of` of a serialized node."""
    return form_of(ir.Node(node.domain, node.op_type, inputs=[]))


def _summed(
    node: onnx.NodeProto,
    made: Mapping[str, onnx.NodeProto],
    dims: Mapping[str, list[int]],
    types: Mapping[str, int],
) -> tuple[int, int]:
    """(K, the element type the sum is computed in) of the sum ``node``'s output carries:
    MatMulNBits' K, or quantize_dynamic's chain Mul <- Cast <- MatMulInteger/ConvInteger."""
    if node.op_type == "MatMulNBits":
        k = next((a.i for a in node.attribute if a.name == "K"), 1)
        scales = node.input[2] if len(node.input) > 2 else ""
        return int(k), types.get(scales, TensorProto.FLOAT)
    for name in node.input:
        cast = made.get(name)
        if cast is not None and cast.op_type == "Cast" and cast.input:
            integer = made.get(cast.input[0])
            if integer is not None:
                return _terms(integer, dims), TensorProto.FLOAT
    return 1, TensorProto.FLOAT


def _rewritten_terms(node: ir.Node) -> int:
    """K of a rewritten MatMul/Conv from what shape inference knows of its operands (two
    activations multiplied: no weight to read it from); 0 where unknown."""
    operands = [*node.inputs[:2], None, None][:2]
    a, b = (value_shape(v) if v is not None else None for v in operands)
    if node.op_type == "MatMul":
        for shape, axis in ((a, -1), (b, -2)):
            if shape is not None and len(shape) >= 2 and shape[axis]:
                return int(shape[axis] or 1)
    if node.op_type == "Conv" and b is not None and len(b) > 1 and all(b[1:]):
        return int(np.prod([d or 1 for d in b[1:]]))
    return 0


def _terms(node: onnx.NodeProto, dims: Mapping[str, list[int]]) -> int:
    """How many products each output of an integer kernel sums (1 where not a sum or the
    weight's shape is unknown)."""
    weight_slot = {"MatMulInteger": 1, "ConvInteger": 1}.get(node.op_type, 3)
    shape = dims.get(node.input[weight_slot] if len(node.input) > weight_slot else "")
    if not shape:
        return 1
    if node.op_type in ("ConvInteger", "QLinearConv"):
        return int(np.prod(shape[1:]))
    if node.op_type == "QGemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return int(shape[-1] if trans_b else shape[0])
    if node.op_type in ("MatMulInteger", "QLinearMatMul"):
        return int(shape[-2]) if len(shape) >= 2 else 1
    return 1


def with_noise(proto: onnx.ModelProto, found: Sequence[Site]) -> onnx.ModelProto:
    """A copy of ``proto`` whose sites get their noise while the boolean input :data:`SWITCH`
    is true, and are untouched (bit for bit) while it is false."""
    noisy = onnx.ModelProto()
    noisy.CopyFrom(proto)
    by_tensor = {s.tensor: s for s in found if s.kind != REQUANTIZATION}
    by_node = {(s.node, s.tensor): s for s in found if s.kind == REQUANTIZATION}
    types = _elem_types(noisy)
    seed = 0
    for graph in proto_graphs(noisy.graph):
        nodes: list[onnx.NodeProto] = []
        for node in graph.node:
            for index, name in enumerate(node.input):
                site = by_node.get((node.name, name))
                if site is not None:
                    seed += 1
                    node.input[index] = f"{name}_noisy{seed}"
                    nodes += _noise(name, node.input[index], site, seed, TensorProto.FLOAT)
            nodes.append(node)
            for index, name in enumerate(node.output):
                site = by_tensor.get(name)
                if site is not None:
                    seed += 1
                    raw = f"{name}_exact{seed}"
                    node.output[index] = raw
                    nodes += _noise(raw, name, site, seed, types.get(name, TensorProto.FLOAT))
        del graph.node[:]
        graph.node.extend(nodes)
    noisy.graph.input.append(helper.make_tensor_value_info(SWITCH, TensorProto.BOOL, []))
    return noisy


def _elem_types(proto: onnx.ModelProto) -> dict[str, int]:
    """The element types of the tensors sites may name: MatMulNBits' outputs have its scales'
    type, Mul outputs their constant operand's (a float16 weight chain), the rest float32."""
    graphs = list(proto_graphs(proto.graph))
    inits = {t.name: t.data_type for g in graphs for t in g.initializer}
    found = {}
    for graph in graphs:
        for node in graph.node:
            if node.op_type == "MatMulNBits" and len(node.input) > 2:
                found[node.output[0]] = inits.get(node.input[2], TensorProto.FLOAT)
            elif node.op_type == "Mul" and node.output:
                known = [inits[i] for i in node.input if i in inits]
                if known:
                    found[node.output[0]] = known[0]
    return found


def _noise(raw: str, out: str, site: Site, seed: int, elem: int) -> list[onnx.NodeProto]:
    """Nodes computing ``out`` from ``raw``: ``raw`` with the site's noise while the switch is
    on, ``raw`` itself (bit for bit) while it is off. Computed in float32."""
    p = f"quantgraph_noise{seed}"
    make = helper.make_node
    nodes = []
    value = raw
    if elem != TensorProto.FLOAT:
        nodes.append(make("Cast", [raw], [f"{p}_float"], name=f"{p}_float", to=TensorProto.FLOAT))
        value = f"{p}_float"
    low, high = (-site.noise, site.noise) if site.kind == SUM else (1 - site.noise, 1 + site.noise)
    nodes.append(
        make(
            "RandomUniformLike",
            [value],
            [f"{p}_draw"],
            name=f"{p}_draw",
            dtype=TensorProto.FLOAT,
            low=low,
            high=high,
            seed=float(seed),
        )
    )
    if site.kind == SUM:
        nodes += [
            make("Abs", [value], [f"{p}_abs"], name=f"{p}_abs"),
            make("ReduceMax", [f"{p}_abs"], [f"{p}_max"], name=f"{p}_max", keepdims=1),
            make("Mul", [f"{p}_draw", f"{p}_max"], [f"{p}_delta"], name=f"{p}_delta"),
            make("Add", [value, f"{p}_delta"], [f"{p}_moved"], name=f"{p}_moved"),
        ]
    else:
        nodes.append(make("Mul", [value, f"{p}_draw"], [f"{p}_moved"], name=f"{p}_moved"))
    chosen = out if elem == TensorProto.FLOAT else f"{p}_chosen"
    nodes.append(make("Where", [SWITCH, f"{p}_moved", value], [chosen], name=f"{p}_where"))
    if elem != TensorProto.FLOAT:
        nodes.append(make("Cast", [chosen], [out], name=f"{p}_back", to=elem))
    return nodes


def spread(
    run: Callable[[Mapping[str, np.ndarray]], Sequence[np.ndarray]],
    outputs: Sequence[str],
    declared: Mapping[str, int | None],
    samples: Sequence[Mapping[str, np.ndarray]],
    runs: int = RUNS,
    *,
    still: Sequence[Sequence[np.ndarray]] | None = None,
) -> dict[str, float]:
    """Each output's largest distance between the noisy model's runs with the noise on and its
    run with it off, over ``samples``. ``run(feeds)`` runs the noisy model (its outputs in the
    order of ``outputs``); ``still``: its outputs with the noise off on each sample where the
    caller has them (the reference's own: the same bits); non-finite differences are left out
    (the verdict counts them)."""
    found = dict.fromkeys(outputs, 0.0)
    for index, sample in enumerate(samples):
        off = still[index] if still is not None else run({**sample, SWITCH: np.array(False)})
        for _ in range(runs):
            moved = run({**sample, SWITCH: np.array(True)})
            for name, a, b in zip(outputs, off, moved, strict=True):
                found[name] = max(found[name], _distance(a, b, declared.get(name)))
    return found


def _distance(a: object, b: object, elem: int | None) -> float:
    x, y = typed(a, elem), typed(b, elem)
    if x.shape != y.shape or x.dtype.kind in "OSUb" or x.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        apart = np.abs(x.astype(np.float64) - y.astype(np.float64))
    apart = apart[np.isfinite(apart)]
    return float(apart.max()) if apart.size else 0.0
