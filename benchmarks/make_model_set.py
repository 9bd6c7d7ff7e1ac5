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


def quantize_u8(
    float_path: Path,
    out: Path,
    shape: list[int] | None = None,
    feeds: Callable[[np.random.Generator], dict[str, np.ndarray]] | None = None,
) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    model = onnx.load(float_path)
    name = model.graph.input[0].name
    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.left = [
                feeds(rng) if feeds is not None else {name: rng.random(shape, dtype=np.float32)}
                for _ in range(8)
            ]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.left.pop() if self.left else None

    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(
        str(float_path),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )


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
    int4_matmul(folder / "int4_matmul.onnx")
    for name in ("smart_turn", "nudenet_u8", "ppocr_cls_u8", "silero_vad_u8", "int4_matmul"):
        quantgraph.convert(folder / f"{name}.onnx").save(folder / f"{name}_qg.onnx", force=True)
        print(f"wrote {folder / name}.onnx and {name}_qg.onnx")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
