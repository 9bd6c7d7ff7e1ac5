"""What one fuzz example is: the profiles, the :class:`Signature` a model fixes and the
:class:`Case` (one call: its tensors and the rule it breaks), and :func:`bits`, the raw bits
a repro and a mismatch show.

Plain data, apart from the strategy that draws it, so models, fuzzer and tests share it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from quantgraph.spec import OPS as SPEC_OPS
from quantgraph.spec import PER_CHANNEL, PER_TENSOR

OP_NAMES = tuple(SPEC_OPS)
STATIC_OPS = tuple(name for name, op in SPEC_OPS.items() if op.is_static)
QUANTIZE_OPS = tuple(name for name, op in SPEC_OPS.items() if op.is_quantize)
NODE = "fuzz_node"


# -- profiles ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    name: str
    examples_per_op: int
    large_percent: int  # examples with > 2^17 elements (the native kernels' threaded path)
    error_percent: int  # examples that break one rule of the spec
    cache_size: int  # dynamic-op signatures whose sessions are kept


PROFILES = {
    "ci": Profile("ci", examples_per_op=250, large_percent=0, error_percent=15, cache_size=512),
    "long": Profile(
        "long", examples_per_op=26_000, large_percent=1, error_percent=15, cache_size=1024
    ),
}


# -- what one example is -----------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """Everything a model fixes about a call; the dynamic ops' sessions are cached per value.

    ``zps``: the zps input's type for dynamic ops; for static ops "s32" when the zps attribute
    is present. ``qtype``/``axis``/``output_dtype`` None: the attribute is left out.
    """

    op: str
    src: str
    dst: str
    zps: str | None
    rank: int
    qtype: str | None
    axis: int | None
    output_dtype: int | None = None
    scales: str = "f32"  # DynamicDequantize: f16/bf16 too (dst is the scales' type)
    group_shape: tuple[int, ...] | None = None  # per_group only

    @property
    def per_channel(self) -> bool:
        return self.qtype == PER_CHANNEL

    @property
    def axis_value(self) -> int:
        return 1 if self.axis is None else self.axis

    @property
    def resolved_axis(self) -> int | None:
        if not self.per_channel:
            return None
        axis = self.axis_value
        if not -self.rank <= axis < self.rank:
            return None
        return axis + self.rank if axis < 0 else axis

    def attributes(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.qtype is not None:
            found["qtype"] = self.qtype
        if self.axis is not None:
            found["axis"] = self.axis
        if self.output_dtype is not None:
            found["output_dtype"] = self.output_dtype
        if self.group_shape is not None:
            found["group_shape"] = list(self.group_shape)
        return found

    def row(self) -> str:
        """The data-type row and zps type, and per_group: what coverage is counted by."""
        grouped = ", per_group" if self.group_shape is not None else ""
        return f"{self.src}->{self.dst} scales {self.scales} zps {self.zps or 'none'}{grouped}"

    def describe(self) -> str:
        attrs = ", ".join(f"{k}={v}" for k, v in self.attributes().items())
        return (
            f"{self.op}({self.src} -> {self.dst}, scales {self.scales}, zps {self.zps or 'none'}, "
            f"rank {self.rank}"
            f"{', ' + attrs if attrs else ''})"
        )


@dataclass
class Case:
    """One call: the signature, the tensors, and the rule it breaks (None: a valid call)."""

    sig: Signature
    src: np.ndarray
    scales: np.ndarray  # f32, 1-D (static ops: the scales attribute)
    zps: np.ndarray | None  # dynamic ops: typed input; static ops: int64 attribute values
    rule: str | None
    seed: int

    @property
    def static(self) -> bool:
        return self.sig.op in STATIC_OPS

    def reference_kwargs(self) -> dict[str, Any]:
        sig = self.sig
        kwargs: dict[str, Any] = {"qtype": sig.qtype or PER_TENSOR, "axis": sig.axis_value}
        if sig.group_shape is not None:
            kwargs["group_shape"] = list(sig.group_shape)
        if sig.op in QUANTIZE_OPS:
            kwargs["output_dtype"] = sig.output_dtype or 0
        kwargs["node"] = NODE
        return kwargs

    def repro(self) -> dict[str, Any]:
        """What reproduces the call: the signature, the parameters and (small) tensors."""
        found: dict[str, Any] = {
            "signature": asdict(self.sig),
            "rule": self.rule,
            "seed": self.seed,
            "src_shape": list(self.src.shape),
            "scales": [float(v) for v in self.scales.reshape(-1)[:16]],
            "zps": None if self.zps is None else [int(v) for v in self.zps.reshape(-1)[:16]],
        }
        if self.src.size <= 64:
            found["src_bits"] = bits(self.src).reshape(-1).tolist()
        return found


def bits(array: np.ndarray) -> np.ndarray:
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize]
    return np.ascontiguousarray(array).view(width)
