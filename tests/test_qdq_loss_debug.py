"""validate FLOAT QDQ agrees with onnxruntime's own debugger (issue #35 item 6).

``onnxruntime.quantization.qdq_loss_debug`` saves every tensor of both models, pairs each
quantized activation's value before Q with its value after DQ, and gives two SQNRs: ``xmodel_err``
(the float model's tensor vs the QDQ model's DQ output: what our ``error_stats`` measure) and
``qdq_err`` (the QDQ model's own value before Q vs after DQ). Ours feeds each Q/DQ the float
model's values (the error introduced there, nothing inherited), so ``qdq_err`` is the same
figure only where the QDQ model's value before Q is the float one: the graph's inputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantgraph.validation import make_inputs, validate

SAMPLES = 3


def _float_model() -> onnx.ModelProto:
    """Conv, Relu, Conv, Add (a residual), Sigmoid, MatMul: activations of several kinds."""
    rng = np.random.default_rng(7)

    def weight(name: str, shape: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
        helper.make_node("Sigmoid", ["s"], ["g"], name="sigmoid"),
        helper.make_node("MatMul", ["g", "m"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        "agree",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 5])],
        [
            weight("w1", [4, 4, 3, 3]),
            weight("b1", [4]),
            weight("w2", [4, 4, 3, 3]),
            weight("b2", [4]),
            weight("m", [8, 5]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


class _Samples:
    """The samples validate draws (seeds 0..SAMPLES-1), as a CalibrationDataReader."""

    def __init__(self, model: Path) -> None:
        self.samples: Iterator[dict[str, np.ndarray]] = iter(
            [make_inputs(model, seed=s) for s in range(SAMPLES)]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.samples, None)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self.samples


def test_sqnr_agrees_with_onnxruntimes_qdq_loss_debug(tmp_path: Path) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_activation_error,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    class Calibration(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(1)  # narrower than the samples: some clipping too
            self.it = iter([{"x": rng.uniform(-1, 1, (1, 4, 8, 8)).astype(np.float32)}] * 2)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    float_path, qdq_path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(_float_model(), float_path)
    quantize_static(float_path, qdq_path, Calibration(), quant_format=QuantFormat.QDQ)

    saved_float, saved_qdq = tmp_path / "float_saved.onnx", tmp_path / "qdq_saved.onnx"
    modify_model_output_intermediate_tensors(float_path, saved_float)
    modify_model_output_intermediate_tensors(qdq_path, saved_qdq)
    float_acts = collect_activations(str(saved_float), _Samples(float_path))
    qdq_acts = collect_activations(str(saved_qdq), _Samples(float_path))
    theirs = compute_activation_error(create_activation_matching(qdq_acts, float_acts))

    report = validate(float_path, qdq_path, intermediate=True, iterations=SAMPLES, atol=1e9)
    assert report.debug is not None
    ours = report.error_stats
    both = sorted(set(theirs) & set(ours))
    # every quantized tensor the float graph computes (c1's Relu is folded into r1's Q)
    assert both == ["c2", "g", "r1", "s", "y"], (both, sorted(theirs))
    for name in both:
        assert ours[name].sqnr_db == pytest.approx(theirs[name]["xmodel_err"], abs=1e-4), name
    # the graph's input is fed, not computed: the debugger's figure for its own Q/DQ
    introduced = {t.tensor: t.sqnr_db for t in report.debug.tensors}
    assert introduced["x"] == pytest.approx(theirs["x"]["qdq_err"], abs=1e-4)
