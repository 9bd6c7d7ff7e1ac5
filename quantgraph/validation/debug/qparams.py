"""Why a quantized tensor is bad: its Q's scale and zero point against the float values it gets.

For each QuantizeLinear of a QDQ model whose input the float model also computes (same name),
numpy quantizes the *float model's* tensor with the Q's constant parameters, as onnxruntime
does (float32 ``x / s``, round half to even, ``+ zp``, saturate), and counts over every sample:
the observed float range against the representable one ``((qmin - zp)·s, (qmax - zp)·s)``, the
fraction clipped low and high, the fraction of non-zero values that become 0, and the SQNR of
``DQ(Q(x))`` against ``x``: the error quantizing this tensor introduces by itself, whatever
its inputs inherited. Per-channel parameters are applied per channel; the figures are then
summed over channels (the ranges are their union) and the worst channel is named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ...ir.values import constant_array, optional_input

# A reason is given where the numbers show one (the first that holds, in this order).
CLIPPING, COARSE, ROUNDING = "clipping", "coarse scale", "rounding"
CLIPPED_OVER = 0.01  # more than 1% of the values saturate
LEVELS_UNDER = 16  # the observed values span fewer than 16 quantization steps
ZEROED_OVER = 0.25  # more than a quarter of the values (non-zero in float) become 0


def sqnr(signal: float, noise: float) -> float:
    """10 log10(signal / noise) in dB (onnxruntime's qdq_loss_debug formula); +inf: no noise."""
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


@dataclass(frozen=True)
class QParams:
    """A QuantizeLinear's constant parameters, broadcastable against its input."""

    node: str
    tensor: str
    source: str  # the float model's name for it: ``tensor``, or where quantize_static
    # renamed a graph output's producer (y_QuantizeLinear_Input), its DQ's output (y)
    dtype: str  # numpy name of the quantized type: "uint8", "int8", ...
    qmin: int
    qmax: int
    scale: np.ndarray  # float32, shape 1 per tensor; [C] per axis
    zero_point: np.ndarray  # int64, the scale's shape
    axis: int | None  # None: per tensor

    def shaped(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """Scale and zero point shaped to broadcast against a tensor of ``rank``."""
        if self.axis is None:
            return self.scale.reshape(()), self.zero_point.reshape(())
        shape = [1] * rank
        shape[self.axis % rank] = -1
        return self.scale.reshape(shape), self.zero_point.reshape(shape)


_INTEGER = {
    ir.DataType.UINT8: (0, 255),
    ir.DataType.INT8: (-128, 127),
    ir.DataType.UINT16: (0, 65535),
    ir.DataType.INT16: (-32768, 32767),
    ir.DataType.UINT4: (0, 15),
    ir.DataType.INT4: (-8, 7),
}


def qparams_of(node: ir.Node) -> QParams | None:
    """The parameters of an ONNX/com.microsoft QuantizeLinear with constant scale and zero
    point onto an integer type, per tensor or per axis (None for blocked, float8, or
    parameters computed at run time)."""
    if node.op_type != "QuantizeLinear" or node.domain not in ("", "ai.onnx", "com.microsoft"):
        return None
    source = optional_input(node, 0)
    scale_value, zp_value = optional_input(node, 1), optional_input(node, 2)
    scale = constant_array(scale_value)
    if source is None or not source.name or scale is None:
        return None
    zp = constant_array(zp_value)
    if zp_value is not None and zp is None:
        return None
    block = node.attributes.get("block_size")
    if block is not None and block.as_int():
        return None
    attribute = node.attributes.get("output_dtype")
    dtype = ir.DataType.UINT8  # absent zero point and output_dtype: uint8
    if zp_value is not None and zp_value.dtype is not None:
        dtype = zp_value.dtype
    elif attribute is not None and attribute.as_int():
        dtype = ir.DataType(attribute.as_int())
    if dtype not in _INTEGER:
        return None
    qmin, qmax = _INTEGER[dtype]
    flat_scale = scale.astype(np.float32).reshape(-1)
    flat_zp = np.zeros_like(flat_scale, dtype=np.int64) if zp is None else zp.astype(np.int64)
    per_axis = scale.ndim == 1 and scale.size > 1
    axis_attribute = node.attributes.get("axis")
    axis = (axis_attribute.as_int() if axis_attribute else 1) if per_axis else None
    return QParams(
        node.name or "",
        source.name,
        _float_name(node, source.name),
        dtype.numpy().name if dtype not in (ir.DataType.UINT4, ir.DataType.INT4) else dtype.name,
        qmin,
        qmax,
        flat_scale,
        flat_zp.reshape(-1),
        axis,
    )


@dataclass
class TensorQuantization:
    """One quantized tensor: its Q's parameters and what they do to the float model's values.

    Fractions are of every element over every sample; per-axis tensors give the parameters
    of their worst channel (most clipped, then coarsest) and the union of the ranges."""

    tensor: str
    node: str  # the QuantizeLinear
    dtype: str
    per_channel: bool
    channels: int
    scale: float
    zero_point: int
    worst_channel: int | None = None
    elements: int = 0
    observed_min: float = math.inf
    observed_max: float = -math.inf
    representable_min: float = 0.0
    representable_max: float = 0.0
    clipped_low: int = 0
    clipped_high: int = 0
    rounded_to_zero: int = 0
    signal: float = 0.0
    noise: float = 0.0

    @property
    def clipped_low_fraction(self) -> float:
        return self.clipped_low / self.elements if self.elements else 0.0

    @property
    def clipped_high_fraction(self) -> float:
        return self.clipped_high / self.elements if self.elements else 0.0

    @property
    def rounded_to_zero_fraction(self) -> float:
        return self.rounded_to_zero / self.elements if self.elements else 0.0

    @property
    def sqnr_db(self) -> float:
        """The SQNR of DQ(Q(x)) against x: the error this tensor's Q/DQ introduces."""
        return sqnr(self.signal, self.noise)

    @property
    def levels(self) -> float:
        """How many quantization steps of the worst channel the observed values span inside
        the representable range."""
        if not self.elements or self.scale <= 0:
            return 0.0
        low = max(self.observed_min, self.representable_min)
        high = min(self.observed_max, self.representable_max)
        return max(high - low, 0.0) / self.scale

    @property
    def reason(self) -> str | None:
        if not self.elements or self.noise == 0.0:
            return None
        if self.clipped_low_fraction + self.clipped_high_fraction > CLIPPED_OVER:
            return CLIPPING
        if self.levels < LEVELS_UNDER:
            return COARSE
        if self.rounded_to_zero_fraction > ZEROED_OVER:
            return ROUNDING
        return None

    def to_dict(self) -> dict[str, object]:
        sqnr_db = self.sqnr_db
        return {
            "tensor": self.tensor,
            "node": self.node,
            "dtype": self.dtype,
            "per_channel": self.per_channel,
            "channels": self.channels,
            "worst_channel": self.worst_channel,
            "scale": self.scale,
            "zero_point": self.zero_point,
            "elements": self.elements,
            "observed_range": [self.observed_min, self.observed_max] if self.elements else None,
            "representable_range": [self.representable_min, self.representable_max],
            "clipped_low": self.clipped_low_fraction,
            "clipped_high": self.clipped_high_fraction,
            "rounded_to_zero": self.rounded_to_zero_fraction,
            "levels": round(self.levels, 3),
            "sqnr_db": None if math.isinf(sqnr_db) else round(sqnr_db, 3),
            "reason": self.reason,
        }


class TensorCounter:
    """Accumulates :class:`TensorQuantization` over samples, per channel."""

    def __init__(self, params: QParams) -> None:
        self.params = params
        channels = params.scale.size
        self.low = np.full(channels, np.inf)
        self.high = np.full(channels, -np.inf)
        self.count = np.zeros(channels, dtype=np.int64)
        self.clipped_low = np.zeros(channels, dtype=np.int64)
        self.clipped_high = np.zeros(channels, dtype=np.int64)
        self.zeroed = np.zeros(channels, dtype=np.int64)
        self.signal = 0.0
        self.noise = 0.0

    def add(self, values: np.ndarray) -> None:
        p = self.params
        x = np.asarray(values)
        if x.dtype.kind != "f" or x.size == 0:
            return
        x = x.astype(np.float32)
        if p.axis is not None and (x.ndim <= p.axis % max(x.ndim, 1) or x.ndim == 0):
            return
        if p.axis is not None and x.shape[p.axis % x.ndim] != p.scale.size:
            return
        scale, zp = p.shaped(x.ndim)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            rounded = np.rint(x / scale).astype(np.float64) + zp  # onnxruntime: x / s in float32
        finite = np.isfinite(x)
        low, high = rounded < p.qmin, rounded > p.qmax
        q = np.clip(np.nan_to_num(rounded, nan=p.qmin), p.qmin, p.qmax)
        dequantized = ((q - zp) * scale).astype(np.float32)
        zeroed = (q == zp) & (x != 0)
        moved = np.moveaxis if p.axis is not None else None
        per_channel = [low, high, zeroed, np.where(finite, x, np.nan)]
        if moved is not None:
            axis = p.axis % x.ndim  # type: ignore[operator]
            per_channel = [moved(a, axis, 0).reshape(p.scale.size, -1) for a in per_channel]
        else:
            per_channel = [a.reshape(1, -1) for a in per_channel]
        lows, highs, zeros, finite_values = per_channel
        self.clipped_low += lows.sum(axis=1)
        self.clipped_high += highs.sum(axis=1)
        self.zeroed += zeros.sum(axis=1)
        self.count += lows.shape[1]
        with np.errstate(all="ignore"):
            if finite_values.shape[1]:
                self.low = np.fmin(self.low, np.nanmin(finite_values, axis=1))
                self.high = np.fmax(self.high, np.nanmax(finite_values, axis=1))
        want = x[finite].astype(np.float64)
        diff = want - dequantized[finite].astype(np.float64)
        self.signal += float(np.dot(want, want))
        self.noise += float(np.dot(diff, diff))

    def result(self) -> TensorQuantization:
        p = self.params
        clipped = (self.clipped_low + self.clipped_high) / np.maximum(self.count, 1)
        # the worst channel: most clipped, then the largest scale
        worst = int(np.lexsort((p.scale, clipped))[-1])
        representable = (
            (p.qmin - p.zero_point).astype(np.float64) * p.scale,
            (p.qmax - p.zero_point).astype(np.float64) * p.scale,
        )
        found = TensorQuantization(
            p.tensor,
            p.node,
            p.dtype,
            p.axis is not None,
            int(p.scale.size),
            float(p.scale[worst]),
            int(p.zero_point[worst]),
            worst if p.axis is not None else None,
            elements=int(self.count.sum()),
            representable_min=float(representable[0].min()),
            representable_max=float(representable[1].max()),
            clipped_low=int(self.clipped_low.sum()),
            clipped_high=int(self.clipped_high.sum()),
            rounded_to_zero=int(self.zeroed.sum()),
            signal=self.signal,
            noise=self.noise,
        )
        if found.elements and np.isfinite(self.low).any():
            found.observed_min = float(np.nanmin(self.low))
            found.observed_max = float(np.nanmax(self.high))
        return found


def _float_name(q: ir.Node, name: str) -> str:
    if not name.endswith("_QuantizeLinear_Input"):
        return name
    for use in q.outputs[0].uses():
        dq = use.node
        if dq.op_type == "DequantizeLinear" and dq.outputs[0].name:
            return dq.outputs[0].name
    return name


def quantized_tensors(graph: ir.Graph, known: set[str]) -> list[QParams]:
    """The QuantizeLinear parameters of every tensor in ``known`` (the float model's names) a
    Q of ``graph`` reads (the first Q per tensor: quantize_static writes one)."""
    found: dict[str, QParams] = {}
    for node in graph:
        params = qparams_of(node)
        if params is not None and params.source in known and params.tensor not in found:
            found[params.tensor] = params
    return list(found.values())
