"""The operators onnxruntime has CPU kernels for, asked of the installed onnxruntime."""

from __future__ import annotations

import functools

import onnxruntime as ort


@functools.lru_cache(maxsize=1)
def _cpu_kernels() -> frozenset[tuple[str, str]]:
    found = set()
    for kernel in ort.capi._pybind_state.get_all_opkernel_def():
        if kernel.provider == "CPUExecutionProvider":
            found.add(("" if kernel.domain == "ai.onnx" else kernel.domain, kernel.op_name))
    return frozenset(found)


def registered(domain: str, op_type: str) -> bool:
    """Whether onnxruntime's CPU execution provider runs ``op_type`` of ``domain``."""
    return ("" if domain == "ai.onnx" else domain, op_type) in _cpu_kernels()
