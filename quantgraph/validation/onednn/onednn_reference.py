"""The original evaluated in oneDNN's arithmetic: what a rewritten model computing oneDNN's
arithmetic (``--backend onednn``, ``--arithmetic onednn``) is compared with, exactly.

The original's Q/DQ compute ONNX's arithmetic (``rne(x / s) + zp``); oneDNN's is
``rne(x * fl(1/s) + zp)``. Comparing the two says how far the arithmetics are apart, not
whether the rewrite or the backend is right: ties land a step apart on ordinary data. So the
verdict compares like with like: the original, converted in memory with quantgraph's default
passes and run on the native backend's model of oneDNN's arithmetic (held bit for bit to oneDNN
and to the numpy model :mod:`quantgraph.reference.onednn_arithmetic` by the conformance tests),
against the rewritten model. The distance to the ONNX-arithmetic original, in quantization
steps, is information beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ...backends import native_available
from ...converter import convert
from ...errors import ModelError
from ...runtime.session import InferenceSession
from ..debug.intermediate import with_all_outputs

REFERENCE_BACKEND = "native"
ONEDNN = "onednn"
UNAVAILABLE = (
    "the native backend is not built, so the original cannot be evaluated in oneDNN's "
    "arithmetic: compared with the ONNX-arithmetic original instead, judged by --atol/--rtol"
)


def available() -> bool:
    """Whether the reference can run here (it needs the native library)."""
    return native_available()


class OnednnReference:
    """The original, converted, on the native backend computing oneDNN's arithmetic; with
    ``intermediate`` it also outputs every tensor it computes (the same names as the
    original's: conversion keeps them)."""

    def __init__(
        self,
        original: ir.Model,
        options: ort.SessionOptions,
        fusion: str,
        label: str,
        intermediate: bool = False,
    ) -> None:
        try:
            converted = convert(original, check=False)  # convert works on a private copy
        except ModelError as error:
            raise ModelError(
                f"{label}: cannot be evaluated in oneDNN's arithmetic: {error}"
            ) from None
        model = with_all_outputs(converted.model)[0] if intermediate else converted.model
        self._session = InferenceSession(
            model, REFERENCE_BACKEND, arithmetic=ONEDNN, options=options, fusion=fusion
        )
        self.names = frozenset(o.name for o in self._session.get_outputs())

    def run(self, names: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return list(self._session.run(list(names), dict(feeds)))


def for_validation(
    original: ir.Model,
    label: str,
    float_reference: bool,
    backend: str | None,
    arithmetic: str | None,
    fusion: str,
    options: ort.SessionOptions,
    intermediate: bool,
) -> OnednnReference | None:
    """The original in oneDNN's arithmetic where the rewritten side computes it (and neither a
    float original nor oneDNN's partitions make the comparison inexact anyway)."""
    from ...backends import require, resolve_arithmetic
    from ...fusion.plan import PARTITION_MODES
    from ..compare.error_stats import has_quantization

    if float_reference or fusion in PARTITION_MODES or not has_quantization(original.graph):
        return None
    if resolve_arithmetic(require(backend), arithmetic) != ONEDNN or not available():
        return None
    return OnednnReference(original, options, fusion, label, intermediate)


__all__ = ["UNAVAILABLE", "OnednnReference", "available", "for_validation"]
