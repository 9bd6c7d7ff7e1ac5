"""The whole-model benchmark set: public models from PyPI wheels, quantized as users do, and
the int4 weight-only MatMul of every LLM layer, each with its quantgraph conversion.

    python benchmarks/make_model_set.py /tmp/models
    quantgraph bench --model /tmp/models/nudenet_u8.onnx /tmp/models/nudenet_u8_qg.onnx

Writes ORIGINAL.onnx and ORIGINAL_qg.onnx (``quantgraph.convert``) for:
- smart_turn: smart-turn v3.2, a QDQ audio transformer shipped in the ``pipecat-ai`` wheel;
- nudenet_u8: the ``nudenet`` wheel's 320n detector, quantize_static u8 (QDQ, per-channel
  weights, 8 random calibration images);
- ppocr_cls_u8: the ``rapidocr_onnxruntime`` wheel's PP-OCR text-direction classifier (input
  [-1, 3, ?, ?]), quantize_static u8 like nudenet, and inputs ppocr_cls_inputs.npz (1x3x48x192);
- silero_vad_u8: the ``silero-vad`` wheel's 16 kHz voice-activity model (STFT convolution,
  encoder convolutions, an LSTM carrying its state between calls in an If branch; inputs input
  [batch, sequence], state [2, batch, 128], sr), quantize_static u8 like nudenet, and inputs
  silero_vad_inputs.npz (one 512-sample frame);
- nudenet_s8: the same detector with s8 activations (quantize_static's default QInt8/QInt8);
- encoder_u8 / encoder_s8: a MiniLM-shaped encoder (6 layers, hidden 384, FFN 1536, random
  weights) quantized u8 and s8, and inputs encoder_inputs.npz (batch 4, sequence 64);
- twin_u8 / twin_s8: two 768 x 768 MatMuls with M symbolic (M = 1 in the bench);
- int4_matmul: x[M, 4096] @ DequantizeLinear(int4 [4096, 4096], block 32, axis 0), written by
  onnxruntime's MatMulNBitsQuantizer in QDQ form, and inputs int4_matmul_m{1,16,128}.npz.
Wheels are fetched with ``pip download`` (PyPI only) into the output folder.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import quantgraph

WHEELS = {
    "smart_turn": (
        "pipecat-ai==1.14.0",
        "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
    ),
    "nudenet_float": ("nudenet==3.4.2", "nudenet/320n.onnx"),
    "ppocr_cls_float": (
        "rapidocr_onnxruntime==1.4.4",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    ),
    "silero_vad_float": ("silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx"),
}


def from_wheel(requirement: str, member: str, folder: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "-d",
            str(folder),
            requirement,
        ],
        check=True,
    )
    name = requirement.split("==")[0].replace("-", "_")
    wheel = next(folder.glob(f"{name}-*.whl"))
    target = folder / Path(member).name
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(member))
    return target


def silero_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "input": (0.1 * rng.standard_normal((1, 512))).astype(np.float32),
        "state": np.zeros((2, 1, 128), np.float32),
        "sr": np.array(16000, np.int64),
    }


Feeds = Callable[[np.random.Generator], dict[str, np.ndarray]]


def quantize_u8(
    float_path: Path, out: Path, shape: list[int] | None = None, feeds: Feeds | None = None
) -> None:
    """u8 activations, s8 per-channel weights, QDQ: what onnxruntime fuses into its integer
    kernels on x86. Calibration: 8 ``feeds`` samples, else uniform [0, 1) of ``shape``."""
    if feeds is None:
        name = onnx.load(float_path).graph.input[0].name
        feeds = lambda rng: {name: rng.random(shape, dtype=np.float32)}  # noqa: E731
    _quantize(float_path, out, feeds, activations_u8=True)


def quantize_s8(float_path: Path, out: Path, feeds: Feeds) -> None:
    """quantize_static's defaults today: s8 activations (QInt8/QInt8), per-channel weights, QDQ;
    onnxruntime does not fuse s8 activations on x86 (DQ -> float op -> Q), oneDNN does."""
    _quantize(float_path, out, feeds, activations_u8=False)


def _quantize(float_path: Path, out: Path, feeds: Feeds, *, activations_u8: bool) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.left = [feeds(rng) for _ in range(8)]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.left.pop() if self.left else None

    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(
        str(float_path),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8 if activations_u8 else QuantType.QInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )


ENCODER = {"layers": 6, "hidden": 384, "heads": 12, "ffn": 1536, "batch": 4, "sequence": 64}


def encoder(out: Path) -> None:
    """A MiniLM-shaped float encoder (6 layers, hidden 384, 12 heads, FFN 1536, GELU), random
    weights, input [batch, sequence, 384] (the embeddings' output): transformer compute without
    a tokenizer or a hub download."""
    rng = np.random.default_rng(5)
    h, heads, ffn = ENCODER["hidden"], ENCODER["heads"], ENCODER["ffn"]
    inits: list[TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def weight(name: str, *shape: int, scale: float = 0.05) -> str:
        inits.append(
            numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
        )
        return name

    def const(name: str, values: list[int] | float) -> str:
        array = np.array(values, np.int64 if isinstance(values, list) else np.float32)
        inits.append(numpy_helper.from_array(array, name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    split = const("split_heads", [0, 0, heads, h // heads])
    merge = const("merge_heads", [0, 0, h])
    scale = const("inv_sqrt_dk", float(1 / np.sqrt(h // heads)))
    half, one, sqrt2 = const("half", 0.5), const("one", 1.0), const("sqrt2", float(np.sqrt(2)))
    x = "x"
    for i in range(ENCODER["layers"]):
        p = f"l{i}"
        heads_of = {}
        for proj in ("q", "k", "v"):
            mm = node("MatMul", [x, weight(f"{p}_w{proj}", h, h)], f"{p}_{proj}_mm")
            added = node("Add", [mm, weight(f"{p}_b{proj}", h, scale=0.02)], f"{p}_{proj}")
            shaped = node("Reshape", [added, split], f"{p}_{proj}_heads")
            perm = [0, 2, 3, 1] if proj == "k" else [0, 2, 1, 3]
            heads_of[proj] = node("Transpose", [shaped], f"{p}_{proj}_t", perm=perm)
        scores = node("MatMul", [heads_of["q"], heads_of["k"]], f"{p}_scores")
        scaled = node("Mul", [scores, scale], f"{p}_scaled")
        probs = node("Softmax", [scaled], f"{p}_probs", axis=-1)
        context = node("MatMul", [probs, heads_of["v"]], f"{p}_context")
        back = node("Transpose", [context], f"{p}_context_t", perm=[0, 2, 1, 3])
        merged = node("Reshape", [back, merge], f"{p}_merged")
        out_mm = node("MatMul", [merged, weight(f"{p}_wo", h, h)], f"{p}_o_mm")
        attn = node("Add", [out_mm, weight(f"{p}_bo", h, scale=0.02)], f"{p}_attn")
        res1 = node("Add", [x, attn], f"{p}_res1")
        ln1 = node(
            "LayerNormalization",
            [res1, const(f"{p}_g1", 1.0), const(f"{p}_e1", 0.0)],
            f"{p}_ln1",
            axis=-1,
        )
        up = node("MatMul", [ln1, weight(f"{p}_w1", h, ffn)], f"{p}_up_mm")
        up_b = node("Add", [up, weight(f"{p}_b1", ffn, scale=0.02)], f"{p}_up")
        # GELU as exported: 0.5 x (1 + erf(x / sqrt 2))
        erf = node("Erf", [node("Div", [up_b, sqrt2], f"{p}_div")], f"{p}_erf")
        gelu = node(
            "Mul",
            [node("Mul", [up_b, half], f"{p}_halfx"), node("Add", [erf, one], f"{p}_erf1")],
            f"{p}_gelu",
        )
        down = node("MatMul", [gelu, weight(f"{p}_w2", ffn, h)], f"{p}_down_mm")
        down_b = node("Add", [down, weight(f"{p}_b2", h, scale=0.02)], f"{p}_down")
        res2 = node("Add", [ln1, down_b], f"{p}_res2")
        x = node(
            "LayerNormalization",
            [res2, const(f"{p}_g2", 1.0), const(f"{p}_e2", 0.0)],
            f"{p}_ln2",
            axis=-1,
        )
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes,
        "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", h])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)


def encoder_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    shape = (ENCODER["batch"], ENCODER["sequence"], ENCODER["hidden"])
    return {"x": rng.standard_normal(shape).astype(np.float32)}


def twin_matmuls(out: Path) -> None:
    """x[M, 768] @ W1 -> Relu -> @ W2 (768 x 768 each), M symbolic: the small-M MatMuls of
    token-by-token decoding, where a partition's per-call overhead shows."""
    rng = np.random.default_rng(6)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
            helper.make_node("Relu", ["h"], ["r"], name="relu"),
            helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
        ],
        "twin_matmuls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", 768])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 768])],
        [
            numpy_helper.from_array((rng.standard_normal((768, 768)) * 0.03).astype(np.float32), n)
            for n in ("w1", "w2")
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)


def twin_feeds(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((1, 768)).astype(np.float32)}


def int4_matmul(out: Path) -> None:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((4096, 4096)) * 0.02).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
        "int4_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 4096])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    config = DefaultWeightOnlyQuantConfig(
        block_size=32, is_symmetric=False, quant_format=QuantFormat.QDQ
    )
    quantizer = MatMulNBitsQuantizer(model, algo_config=config)
    quantizer.process()
    onnx.save(quantizer.model.model, out)
    for rows in (1, 16, 128):
        x = rng.standard_normal((rows, 4096)).astype(np.float32)
        with open(out.parent / f"int4_matmul_m{rows}.npz", "wb") as stream:
            np.savez(stream, x=x)


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        wheels = Path(scratch)
        smart = from_wheel(*WHEELS["smart_turn"], wheels)
        (folder / "smart_turn.onnx").write_bytes(smart.read_bytes())
        nudenet = from_wheel(*WHEELS["nudenet_float"], wheels)
        quantize_u8(nudenet, folder / "nudenet_u8.onnx", [1, 3, 320, 320])
        classifier = from_wheel(*WHEELS["ppocr_cls_float"], wheels)
        quantize_u8(classifier, folder / "ppocr_cls_u8.onnx", [1, 3, 48, 192])
        x = np.random.default_rng(1).random((1, 3, 48, 192), dtype=np.float32)
        with open(folder / "ppocr_cls_inputs.npz", "wb") as stream:
            np.savez(stream, x=x)
        vad = from_wheel(*WHEELS["silero_vad_float"], wheels)
        quantize_u8(vad, folder / "silero_vad_u8.onnx", feeds=silero_feeds)
        with open(folder / "silero_vad_inputs.npz", "wb") as stream:
            frame = silero_feeds(np.random.default_rng(3))
            np.savez(stream, input=frame["input"], state=frame["state"], sr=frame["sr"])
        quantize_s8(
            nudenet,
            folder / "nudenet_s8.onnx",
            lambda r: {"images": r.random((1, 3, 320, 320), dtype=np.float32)},
        )
    encoder(folder / "encoder_float.onnx")
    quantize_u8(folder / "encoder_float.onnx", folder / "encoder_u8.onnx", feeds=encoder_feeds)
    quantize_s8(folder / "encoder_float.onnx", folder / "encoder_s8.onnx", encoder_feeds)
    with open(folder / "encoder_inputs.npz", "wb") as stream:
        np.savez(stream, x=encoder_feeds(np.random.default_rng(2))["x"])
    twin_matmuls(folder / "twin_float.onnx")
    quantize_u8(folder / "twin_float.onnx", folder / "twin_u8.onnx", feeds=twin_feeds)
    quantize_s8(folder / "twin_float.onnx", folder / "twin_s8.onnx", twin_feeds)
    int4_matmul(folder / "int4_matmul.onnx")
    for name in (
        "smart_turn",
        "nudenet_u8",
        "nudenet_s8",
        "ppocr_cls_u8",
        "silero_vad_u8",
        "encoder_u8",
        "encoder_s8",
        "twin_u8",
        "twin_s8",
        "int4_matmul",
    ):
        quantgraph.convert(folder / f"{name}.onnx").save(folder / f"{name}_qg.onnx", force=True)
        print(f"wrote {folder / name}.onnx and {name}_qg.onnx")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
