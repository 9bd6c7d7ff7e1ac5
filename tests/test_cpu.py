"""quantgraph.cpu: the one place that says what the CPU at hand does to int8 kernels, tested on
the three kinds of CPU these machines have (from their /proc/cpuinfo lines) and against what
oneDNN itself reports on this one, with and without its ISA cap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quantgraph.backends import onednn
from quantgraph.cpu import Cpu, cpu, parse_cpuinfo

ROOT = Path(__file__).resolve().parent.parent

BASE = "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx fma f16c avx2 bmi2"
AVX512 = "avx512f avx512dq avx512cd avx512bw avx512vl"
KINDS = {
    # kind: (flags, isa, VNNI, AVX-512)
    "AVX2 only (AMD EPYC, these machines)": (f"{BASE} sse4a", "avx2", False, False),
    "AVX-512 without VNNI (Skylake-SP)": (f"{BASE} {AVX512}", "avx512", False, True),
    "AVX-512 VNNI and BF16 (Zen 4+, Cascade Lake+)": (
        f"{BASE} {AVX512} avx512_vnni avx512_bf16",
        "avx512_vnni",
        True,
        True,
    ),
    "AVX-VNNI without AVX-512 (Alder Lake)": (f"{BASE} avx_vnni", "avx_vnni", True, False),
}


def _cpuinfo(flags: str) -> str:
    return (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
        f"flags\t\t: {flags}\n\nprocessor\t: 1\nmodel name\t: other\nflags\t\t: sse2\n"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_cpu(kind: str) -> None:
    flags, isa, vnni, avx512 = KINDS[kind]
    found = parse_cpuinfo(_cpuinfo(flags), "x86_64")
    assert found.model == "AMD EPYC"  # the first processor's
    assert (found.isa, found.vnni, found.avx512) == (isa, vnni, avx512)
    assert found.int8_products_saturate is not vnni
    assert ("; VNNI)" in found.describe()) is vnni
    assert found.to_dict()["isa"] == isa


def test_other_platforms() -> None:
    arm = parse_cpuinfo("processor\t: 0\nFeatures\t: fp asimd asimddp\n", "aarch64")
    assert (arm.isa, arm.int8_products_saturate) == ("aarch64", False)
    unknown = Cpu("some CPU", "x86_64", frozenset())
    assert unknown.isa == "unknown" and "flags unknown" in unknown.describe()


def test_this_cpu_is_read_once() -> None:
    assert cpu() is cpu()
    assert cpu().model


def _onednn_saturates(max_isa: str | None) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    if max_isa is not None:
        env["ONEDNN_MAX_CPU_ISA"] = max_isa
    code = (
        "from quantgraph.fusion.onednn import onednn_library; "
        "print(onednn_library.int8_saturates())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip() == "True"


@pytest.mark.skipif(not onednn.is_available(), reason="oneDNN is not installed")
@pytest.mark.skipif(not cpu().x86, reason="VNNI is an x86 notion")
def test_onednn_agrees_with_the_cpu_and_its_cap() -> None:
    """oneDNN's own answer follows this CPU, and capped at AVX2 (ONEDNN_MAX_CPU_ISA, the knob
    that shows the other branch on a VNNI CPU) it saturates like a CPU without VNNI."""
    assert _onednn_saturates(None) is cpu().int8_products_saturate
    assert _onednn_saturates("AVX2") is True
