"""A GRU decoder step quantized with quantize_dynamic (issue #42 item 9), and its conversion.

    python benchmarks/make_gru_step.py /tmp/gru            # writes gru_step.onnx, gru_step_qg.onnx
    quantgraph tune /tmp/gru/gru_step_qg.onnx
    quantgraph bench --model /tmp/gru/gru_step.onnx /tmp/gru/gru_step_qg.onnx \\
        --fusions onnxruntime,auto --rounds 9 --repeat 300

One step: token -> Gather(embedding) -> GRU (one time step, state in and out) -> MatMul head ->
logits, through quantize_dynamic's defaults (u8 embedding table, DynamicQuantizeLinear +
MatMulInteger head); the model is tests/producers.py's ``gru_step`` at the sizes given
(``--tokens``, ``--hidden``; the defaults take about 0.2 ms a step on a 2-core EPYC).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent


def main(arguments: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=512)
    given = parser.parse_args(arguments)
    sys.path.insert(0, str(ROOT))  # the tests' producers build it
    import quantgraph
    from tests.producers import gru_step

    given.folder.mkdir(parents=True, exist_ok=True)
    model = gru_step(given.tokens, given.hidden)
    onnx.save(model, given.folder / "gru_step.onnx")
    quantgraph.convert(model).save(given.folder / "gru_step_qg.onnx", force=True)
    print(f"wrote {given.folder / 'gru_step.onnx'} and {given.folder / 'gru_step_qg.onnx'}")


if __name__ == "__main__":
    main(sys.argv[1:])
