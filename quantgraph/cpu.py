"""The CPU at hand, read once: its model name and the ISA extensions that change what int8
kernels compute or how fast they run. Everything that differs by CPU asks here, never assumes.

Why it matters: without VNNI, x86 int8 kernels (onnxruntime's MLAS, oneDNN) multiply u8 x s8
with ``vpmaddubsw``, which adds each pair of products in int16 and saturates; with AVX512-VNNI or
AVX-VNNI (``vpdpbusd``) the products are summed in int32 and nothing saturates. So onnxruntime's
fused QLinearConv/QLinearMatMul land steps away from the unfused Q/DQ composition on an AVX2
CPU and within float rounding of it on a VNNI CPU.

oneDNN can be capped below the CPU (``ONEDNN_MAX_CPU_ISA``); what oneDNN itself does is asked of
oneDNN (:func:`quantgraph.fusion.onednn.onednn_library.int8_saturates`), not inferred from here.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
X86 = ("x86_64", "amd64", "i386", "i686")
# The flags (as Linux names them) that decide an int8 kernel's arithmetic or speed.
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
AVX512_FLAGS = frozenset({"avx512f", "avx512bw", "avx512vl"})
REPORTED_FLAGS = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_int8",
    "amx_bf16",
)


@dataclass(frozen=True)
class Cpu:
    model: str
    machine: str  # platform.machine(): x86_64, aarch64, ...
    flags: frozenset[str]  # empty when the platform does not say (not Linux)

    @property
    def x86(self) -> bool:
        return self.machine.lower() in X86

    @property
    def vnni(self) -> bool:
        """int8 dot products summed in int32 (AVX512-VNNI, AVX-VNNI or AMX)."""
        return bool(self.flags & VNNI_FLAGS)

    @property
    def avx512(self) -> bool:
        return self.flags >= AVX512_FLAGS

    @property
    def isa(self) -> str:
        """The widest int8-relevant ISA, one word: avx512_vnni, avx_vnni, avx512, avx2, ..."""
        if not self.x86:
            return self.machine or "unknown"
        for name, needs in (
            ("avx512_vnni", {"avx512_vnni", *AVX512_FLAGS}),
            ("avx_vnni", {"avx_vnni", "avx2"}),
            ("avx512", AVX512_FLAGS),
            ("avx2", {"avx2"}),
            ("avx", {"avx"}),
            ("sse4_1", {"sse4_1"}),
        ):
            if needs <= self.flags:
                return name
        return "unknown" if not self.flags else "sse2"

    @property
    def int8_products_saturate(self) -> bool:
        """Whether x86 int8 kernels here add u8 x s8 product pairs in saturating int16 (no VNNI),
        as onnxruntime's fused QLinearConv/QLinearMatMul do on such a CPU."""
        return self.x86 and not self.vnni

    def describe(self) -> str:
        """One line: ``AMD EPYC (x86_64: avx2, fma, f16c; no VNNI)``."""
        shown = [f for f in REPORTED_FLAGS if f in self.flags]
        flags = ", ".join(shown) if shown else "flags unknown"
        vnni = "VNNI" if self.vnni else "no VNNI"
        return f"{self.model} ({self.machine}: {flags}; {vnni})"

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "machine": self.machine,
            "isa": self.isa,
            "vnni": self.vnni,
            "flags": [f for f in REPORTED_FLAGS if f in self.flags],
        }


def parse_cpuinfo(text: str, machine: str) -> Cpu:
    """The first processor's model name and flags from /proc/cpuinfo's text."""
    model, flags = "", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:  # Features: Linux on arm64
            flags = frozenset(value.split())
    return Cpu(model or platform.processor() or machine or "unknown CPU", machine, flags)


@cache
def cpu() -> Cpu:
    """This machine's CPU (read once per process)."""
    machine = platform.machine()
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return parse_cpuinfo(text, machine)


__all__ = ["Cpu", "cpu", "parse_cpuinfo"]
