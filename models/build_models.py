"""Build small float32 ONNX models and their static QDQ-quantized variants.

Usage: python models/build_models.py [--out-dir models]

For each model (cnn, transformer, if_branch) this writes:
  <name>_float.onnx  the float32 source model (built with onnx.helper)
  <name>_u8.onnx     quantize_static QDQ, activations uint8, weights int8 per-channel
  <name>_s8.onnx     quantize_static QDQ, activations int8,  weights int8 per-channel

Everything is seeded so that two runs produce byte-identical files.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_static,
)

OPSET = 17  # LayerNormalization needs >= 17; per-channel QDQ needs >= 13.
IR_VERSION = 8  # Matches opset 17; keeps the files loadable by older runtimes.
SEED = 0
NUM_CALIB_SAMPLES = 4

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model: onnx.ModelProto
    # One feed dict per calibration sample.
    calib: list[Feeds]


def _init(name: str, arr: np.ndarray) -> TensorProto:
    # Not np.ascontiguousarray: it promotes 0-d arrays to shape [1].
    return numpy_helper.from_array(arr, name)


def _weights(rng: np.random.Generator, *shape: int) -> np.ndarray:
    # Fan-in scaling keeps activations O(1), so calibration ranges are sane.
    fan_in = int(np.prod(shape[1:])) if len(shape) > 2 else shape[0]
    w: np.ndarray = rng.standard_normal(shape).astype(np.float32) / np.float32(np.sqrt(fan_in))
    return w


def _make_model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="quantgraph.build_models",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def _calib(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> list[Feeds]:
    return [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(NUM_CALIB_SAMPLES)]


def build_cnn() -> ModelSpec:
    rng = np.random.default_rng(SEED)
    inits = [
        _init("conv1_w", _weights(rng, 8, 3, 3, 3)),
        _init("conv1_b", (0.1 * rng.standard_normal(8)).astype(np.float32)),
        _init("conv2_w", _weights(rng, 16, 8, 3, 3)),
        _init("conv2_b", (0.1 * rng.standard_normal(16)).astype(np.float32)),
        # Gemm with transB=1 so the weight is stored [out, in] like a torch Linear.
        _init("fc_w", np.ascontiguousarray(_weights(rng, 16, 10).T)),
        _init("fc_b", (0.1 * rng.standard_normal(10)).astype(np.float32)),
    ]
    nodes = [
        helper.make_node(
            "Conv", ["input", "conv1_w", "conv1_b"], ["conv1"], name="conv1", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node(
            "MaxPool", ["relu1"], ["pool1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("Conv", ["pool1", "conv2_w", "conv2_b"], ["conv2"], name="conv2"),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["relu2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["output"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return ModelSpec("cnn", _make_model(graph), _calib(rng, "input", (1, 3, 16, 16)))


def build_transformer() -> ModelSpec:
    """Single-head self-attention block with pre-LayerNorm and a residual."""
    rng = np.random.default_rng(SEED + 1)
    d, seq = 32, 8
    # Don't name LN's params "ln_scale"/"ln_bias": the quantizer names the
    # scale of activation "ln" as "ln_scale" and silently reuses an existing
    # initializer of that name, giving a [32] per-axis scale that passes
    # check_model but fails at run time.
    inits = [
        _init("ln_gamma", (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)),
        _init("ln_beta", (0.1 * rng.standard_normal(d)).astype(np.float32)),
        _init("inv_sqrt_d", np.array(1.0 / np.sqrt(d), dtype=np.float32)),
    ]
    nodes = [
        helper.make_node(
            "LayerNormalization", ["input", "ln_gamma", "ln_beta"], ["ln"], name="ln", axis=-1
        ),
    ]
    for proj in ("q", "k", "v"):
        inits += [
            _init(f"w{proj}", _weights(rng, d, d)),
            _init(f"b{proj}", (0.1 * rng.standard_normal(d)).astype(np.float32)),
        ]
        nodes += [
            helper.make_node("MatMul", ["ln", f"w{proj}"], [f"{proj}_mm"], name=f"{proj}_matmul"),
            helper.make_node("Add", [f"{proj}_mm", f"b{proj}"], [proj], name=f"{proj}_add"),
        ]
    inits += [
        _init("wo", _weights(rng, d, d)),
        _init("bo", (0.1 * rng.standard_normal(d)).astype(np.float32)),
    ]
    nodes += [
        helper.make_node("Transpose", ["k"], ["k_t"], name="k_transpose", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "k_t"], ["scores"], name="qk_matmul"),
        helper.make_node("Mul", ["scores", "inv_sqrt_d"], ["scores_scaled"], name="scale"),
        helper.make_node("Softmax", ["scores_scaled"], ["probs"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["ctx"], name="pv_matmul"),
        helper.make_node("MatMul", ["ctx", "wo"], ["o_mm"], name="o_matmul"),
        helper.make_node("Add", ["o_mm", "bo"], ["attn"], name="o_add"),
        helper.make_node("Add", ["input", "attn"], ["output"], name="residual"),
    ]
    # quantize_static copes with a symbolic batch dim: calibration just runs
    # the model with whatever batch the reader feeds (here 1).
    graph = helper.make_graph(
        nodes,
        "transformer",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", seq, d])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", seq, d])],
        inits,
    )
    return ModelSpec("transformer", _make_model(graph), _calib(rng, "input", (1, seq, d)))


IF_DIM = 16
IF_SHAPE = (1, 8, IF_DIM)


def _branch(name: str, weight: np.ndarray, act: str) -> onnx.GraphProto:
    # "h" is captured from the outer scope; the weight lives in the subgraph
    # so the branch owns a real constant-weight MatMul.
    return helper.make_graph(
        [
            helper.make_node("MatMul", ["h", f"{name}_w"], [f"{name}_mm"], name=f"{name}_matmul"),
            helper.make_node(act, [f"{name}_mm"], [f"{name}_out"], name=f"{name}_{act.lower()}"),
        ],
        name,
        [],
        [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, list(IF_SHAPE))],
        [_init(f"{name}_w", weight)],
    )


def build_if_branch() -> ModelSpec:
    """MatMul -> If(ReduceSum(h) > 0) with a weight MatMul in each branch."""
    rng = np.random.default_rng(SEED + 2)
    inits = [
        _init("w0", _weights(rng, IF_DIM, IF_DIM)),
        _init("zero", np.array(0.0, dtype=np.float32)),
    ]
    then_w = _weights(rng, IF_DIM, IF_DIM)
    else_w = _weights(rng, IF_DIM, IF_DIM)
    nodes = [
        helper.make_node("MatMul", ["input", "w0"], ["h"], name="pre_matmul"),
        # keepdims=0 with no axes gives a rank-0 tensor, as If requires.
        helper.make_node("ReduceSum", ["h"], ["h_sum"], name="reduce_sum", keepdims=0),
        helper.make_node("Greater", ["h_sum", "zero"], ["cond"], name="cond"),
        helper.make_node(
            "If",
            ["cond"],
            ["output"],
            name="branch",
            then_branch=_branch("then", then_w, "Relu"),
            else_branch=_branch("else", else_w, "Sigmoid"),
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "if_branch",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(IF_SHAPE))],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(IF_SHAPE))],
        inits,
    )
    return ModelSpec("if_branch", _make_model(graph), _calib(rng, "input", IF_SHAPE))


class ListReader(CalibrationDataReader):  # type: ignore[misc]  # ORT ships no stubs
    """Feeds a fixed list of samples; quantize_static consumes it exactly once."""

    def __init__(self, samples: list[Feeds]) -> None:
        self._it: Iterator[Feeds] = iter(samples)

    def get_next(self) -> Feeds | None:
        return next(self._it, None)


def _all_nodes(graph: onnx.GraphProto, depth: int = 0) -> Iterator[tuple[int, onnx.NodeProto]]:
    """(subgraph depth, node) for every node, recursing into If/Loop/Scan bodies."""
    for node in graph.node:
        yield depth, node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g, depth + 1)
            for g in attr.graphs:
                yield from _all_nodes(g, depth + 1)


def _qparams(lo: float, hi: float, qtype: int) -> tuple[float, int]:
    """Asymmetric min/max params, mirroring quantize_static's MinMax defaults."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)  # range must contain 0 exactly
    qmin, qmax = (0, 255) if qtype == TensorProto.UINT8 else (-128, 127)
    scale = (hi - lo) / (qmax - qmin) or 1.0
    zp = int(np.clip(round(qmin - lo / scale), qmin, qmax))
    return float(np.float32(scale)), zp


def add_branch_qdq(model: onnx.ModelProto, spec: ModelSpec, act_qtype: int) -> int:
    """Insert Q->DQ on the MatMul output inside each If branch.

    quantize_static's QDQ quantizer only walks model.graph.node (its
    EnableSubgraph option is honoured by the QOperator path only), so If
    branches come back untouched float. We add one activation Q/DQ pair per
    branch by hand so downstream tooling sees QDQ inside subgraphs. The
    zero point uses the variant's activation dtype (uint8 for _u8, int8 for
    _s8) and the scale comes from numpy min/max over the calibration set.
    Returns the number of pairs inserted (0 if the quantizer already did it).
    """
    if_node = next(n for n in model.graph.node if n.op_type == "If")
    branches = [a.g for a in if_node.attribute if a.type == onnx.AttributeProto.GRAPH]
    if any(n.op_type == "QuantizeLinear" for g in branches for _, n in _all_nodes(g)):
        return 0
    # Float "h" (what the branches actually read) recomputed with numpy.
    w0 = numpy_helper.to_array(next(i for i in spec.model.graph.initializer if i.name == "w0"))
    hs = [s["input"] @ w0 for s in spec.calib]
    inserted = 0
    for g in branches:
        w = numpy_helper.to_array(next(i for i in g.initializer if i.name.endswith("_w")))
        mm = next(n for n in g.node if n.op_type == "MatMul")
        acts = np.stack([h @ w for h in hs])
        scale, zp = _qparams(float(acts.min()), float(acts.max()), act_qtype)
        src = mm.output[0]
        names = {k: f"{src}_{k}" for k in ("scale", "zero_point", "quantized", "dequantized")}
        g.initializer.extend(
            [
                helper.make_tensor(names["scale"], TensorProto.FLOAT, [], [scale]),
                helper.make_tensor(names["zero_point"], act_qtype, [], [zp]),
            ]
        )
        # Rewire consumers first, then splice the pair in right after the MatMul.
        for n in g.node:
            for i, inp in enumerate(n.input):
                if inp == src:
                    n.input[i] = names["dequantized"]
        q = helper.make_node(
            "QuantizeLinear",
            [src, names["scale"], names["zero_point"]],
            [names["quantized"]],
            name=f"{src}_QuantizeLinear",
        )
        dq = helper.make_node(
            "DequantizeLinear",
            [names["quantized"], names["scale"], names["zero_point"]],
            [names["dequantized"]],
            name=f"{src}_DequantizeLinear",
        )
        nodes = list(g.node)
        at = nodes.index(mm) + 1
        del g.node[:]
        g.node.extend([*nodes[:at], q, dq, *nodes[at:]])
        inserted += 1
    return inserted


VARIANTS: dict[str, QuantType] = {"u8": QuantType.QUInt8, "s8": QuantType.QInt8}


def quantize(
    spec: ModelSpec,
    suffix: str,
    act_type: QuantType,
    tmp: Path,
    *,
    per_channel: bool = True,
    op_types_to_quantize: list[str] | None = None,
) -> onnx.ModelProto:
    """quantize_static in QDQ format, weights int8 (per-channel by default), on spec's samples.

    ``per_channel=False`` gives per-tensor weights (and per-tensor int32 biases);
    ``op_types_to_quantize`` restricts or extends the ops quantized (default: every op type
    the QDQ quantizer knows), e.g. to get an LSTM's inputs quantized, which it skips by default.
    """
    src = tmp / f"{spec.name}_float.onnx"
    out = tmp / f"{spec.name}_{suffix}.onnx"
    # Pass a path, not the ModelProto: with a proto, quantize_static re-saves
    # the caller's object with save_as_external_data=True, mutating it in place
    # (initializers become refs to a uuid-named .data file in its temp dir).
    # Both paths live in tmp so the "-inferred" and augmented_model.onnx
    # scratch files never touch the out dir.
    _save(spec.model, src)
    quantize_static(
        src,
        out,
        ListReader(spec.calib),
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        activation_type=act_type,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=op_types_to_quantize,
    )
    model = onnx.load(out)
    if spec.name == "if_branch":
        add_branch_qdq(model, spec, act_type.tensor_type)
    onnx.checker.check_model(model, full_check=True)
    return model


def _save(model: onnx.ModelProto, path: Path) -> None:
    # Deterministic serialisation; all tensors stay inline (no external data).
    path.write_bytes(model.SerializeToString(deterministic=True))


def summarize(model: onnx.ModelProto) -> dict[str, object]:
    """Q/DQ counts (incl. subgraphs), zero-point dtypes, int32 DQ, per-axis scales."""
    inits: dict[str, TensorProto] = {}

    def collect(g: onnx.GraphProto) -> None:
        inits.update({i.name: i for i in g.initializer})
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    collect(a.g)

    collect(model.graph)
    counts = {"Q": 0, "DQ": 0, "Q_sub": 0, "DQ_sub": 0}
    zp_types: set[str] = set()
    int32_dq: list[str] = []
    per_axis: list[str] = []
    len1: list[str] = []  # 1-D scales of length 1: per-tensor, but not rank 0
    for depth, n in _all_nodes(model.graph):
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        key = ("Q" if n.op_type == "QuantizeLinear" else "DQ") + ("_sub" if depth else "")
        counts[key] += 1
        if len(n.input) > 2 and n.input[2] in inits:
            zp_types.add(TensorProto.DataType.Name(inits[n.input[2]].data_type))
        if n.op_type != "DequantizeLinear":
            continue
        x = inits.get(n.input[0])
        if x is not None and x.data_type == TensorProto.INT32:
            int32_dq.append(n.input[0])
        scale = inits[n.input[1]]
        if list(scale.dims) == [1]:
            len1.append(n.input[1])
        elif len(scale.dims) == 1:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)  # ONNX default axis=1
            per_axis.append(f"{n.input[0]}[{scale.dims[0]}]@axis{axis}")
    return {
        **counts,
        "zp": sorted(zp_types),
        "int32_dq": int32_dq,
        "per_axis": per_axis,
        "len1": len1,
    }


def run_check(path: Path, spec: ModelSpec) -> float:
    """Run with all graph optimisations off; return max |quant - float| over two inputs."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    rng = np.random.default_rng(SEED + 100)
    inp = spec.model.graph.input[0]
    # Symbolic dims (transformer's "batch") get 2 to prove they stay dynamic.
    shape = [d.dim_value if d.HasField("dim_value") else 2 for d in inp.type.tensor_type.shape.dim]
    x = rng.standard_normal(shape).astype(np.float32)
    quant = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    ref = ort.InferenceSession(
        spec.model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    err = 0.0
    # x and -x: if_branch's condition is sign(sum(x @ w0)), so this runs both branches.
    for feed in (x, -x):
        (yq,) = quant.run(None, {inp.name: feed})
        (yf,) = ref.run(None, {inp.name: feed})
        err = max(err, float(np.abs(yq - yf).max()))
    return err


BUILDERS: list[Callable[[], ModelSpec]] = [build_cnn, build_transformer, build_if_branch]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    # quantize_static warns about missing pre-processing on every call; the
    # models are already shape-inferred and tiny, so silence that noise.
    logging.getLogger().setLevel(logging.ERROR)

    with tempfile.TemporaryDirectory(prefix="quantgraph-build-") as tmp_dir:
        for build in BUILDERS:
            spec = build()
            _save(spec.model, out_dir / f"{spec.name}_float.onnx")
            for suffix, act_type in VARIANTS.items():
                path = out_dir / f"{spec.name}_{suffix}.onnx"
                model = quantize(spec, suffix, act_type, Path(tmp_dir))
                _save(model, path)
                err = run_check(path, spec)
                s = summarize(model)
                print(
                    f"{path.name:22s} {path.stat().st_size:7d} B  "
                    f"Q={s['Q']}+{s['Q_sub']}sub DQ={s['DQ']}+{s['DQ_sub']}sub "
                    f"zp={s['zp']} max|err|={err:.4f}"
                )
                print(f"    int32 bias DQ: {s['int32_dq']}")
                print(f"    per-axis DQ:   {s['per_axis']}")
                if s["len1"]:
                    print(f"    [1]-shaped DQ scales: {s['len1']}")


if __name__ == "__main__":
    main()
