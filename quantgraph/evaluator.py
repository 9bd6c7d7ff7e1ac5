"""The four operators for ``onnx.reference.ReferenceEvaluator(model, new_ops=REFERENCE_OPS)``.

Each wraps the numpy reference kernel; attributes arrive as keyword arguments with the spec's
defaults filled in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.reference.op_run import OpRun

from . import reference
from .spec import DOMAIN, OPS, PER_TENSOR


def _node_name(op: OpRun) -> str:
    return str(getattr(op.onnx_node, "name", "") or "")


class DynamicQuantize(OpRun):
    op_domain = DOMAIN

    def _run(
        self,
        src: np.ndarray,
        scales: np.ndarray,
        zps: np.ndarray | None = None,
        qtype: str = PER_TENSOR,
        axis: int = 1,
        output_dtype: int = 0,
    ) -> tuple[np.ndarray]:
        return (
            reference.dynamic_quantize(
                src,
                scales,
                zps,
                qtype=qtype,
                axis=axis,
                output_dtype=output_dtype,
                node=_node_name(self),
            ),
        )


class DynamicDequantize(OpRun):
    op_domain = DOMAIN

    def _run(
        self,
        src: np.ndarray,
        scales: np.ndarray,
        zps: np.ndarray | None = None,
        qtype: str = PER_TENSOR,
        axis: int = 1,
    ) -> tuple[np.ndarray]:
        return (
            reference.dynamic_dequantize(
                src, scales, zps, qtype=qtype, axis=axis, node=_node_name(self)
            ),
        )


class Quantize(OpRun):
    op_domain = DOMAIN

    def _run(
        self,
        src: np.ndarray,
        qtype: str = PER_TENSOR,
        axis: int = 1,
        scales: Any = None,
        zps: Any = None,
        output_dtype: int = 0,
    ) -> tuple[np.ndarray]:
        return (
            reference.quantize(
                src,
                scales=scales,
                zps=zps,
                qtype=qtype,
                axis=axis,
                output_dtype=output_dtype,
                node=_node_name(self),
            ),
        )


class Dequantize(OpRun):
    op_domain = DOMAIN

    def _run(
        self,
        src: np.ndarray,
        qtype: str = PER_TENSOR,
        axis: int = 1,
        scales: Any = None,
        zps: Any = None,
    ) -> tuple[np.ndarray]:
        return (
            reference.dequantize(
                src, scales=scales, zps=zps, qtype=qtype, axis=axis, node=_node_name(self)
            ),
        )


REFERENCE_OPS: list[type[OpRun]] = [DynamicQuantize, DynamicDequantize, Quantize, Dequantize]
assert [op.__name__ for op in REFERENCE_OPS] == list(OPS), "one evaluator op per spec op"
