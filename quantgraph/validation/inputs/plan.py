"""Inputs that make sense for a model: a size for every dim it leaves open, values its
consumers take, and for each of them where it came from.

A dim the model fixes keeps its size. Any other dim (symbolic, unnamed, or -1) takes, in this
order: ``--dim INPUT:AXIS=V``, ``--dim NAME=V`` (a symbolic name: every input using it), a
``metadata_props`` entry named like the dim holding an integer, for the spatial dims of an
image-like input (rank 4, float, 1, 3 or 4 channels: NCHW or NHWC) an image size in the
metadata (``imgsz``, ``img_size``, ``image_size`` or ``input_size``: ``320``, ``[320, 320]``) or
else 224, for a sequence-like dim (:func:`sequence_like`) 128, or fewer when a position table has
fewer rows (:func:`.bounds.position_rows`; a bucket table does not count), and otherwise 1.
Values: ``--val-range`` if given; else the bounds the graph puts on them (:mod:`.bounds`: indices
inside what they index, sequence lengths inside the sequence, counts in [1, 8], followed through
ops that pass values on); masks (:mod:`.masks`) 0 or 1 with a 1 in every row; else [-100, 100]
for integers (clipped to the type), booleans, standard normal floats. A decoder with a KV cache
is planned as two cases, a prefill and a decode step (:mod:`.decoder_inputs`), each consistent
across its inputs. When the original refuses these (or computes NaN or inf on them),
:mod:`.search` varies the defaults. No input over :data:`MAX_INPUT_BYTES` is generated; every
command plans through :mod:`.generated`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ...errors import ModelError
from ..options import InputOptionError, check_val_range, size_text, type_range
from .bounds import Sizes, position_rows, value_bounds
from .decoder import decoder_signature
from .decoder_inputs import DecoderCase, Values, decoder_cases
from .masks import mask_reason

SPATIAL_DEFAULT = 224
SEQUENCE_DEFAULT = 128
DEFAULT_DIM = 1
INTEGER_RANGE = (-100, 100)
MAX_INPUT_BYTES = 1 << 30
DRAW_CHUNK = 1 << 22  # elements drawn at a time (32 MiB of float64)
IMAGE_SIZE_KEYS = ("imgsz", "img_size", "image_size", "input_size")
FROM_MODEL = "model"
FROM_DEFAULT = f"default {DEFAULT_DIM}"
FROM_IMAGE_DEFAULT = f"image default {SPATIAL_DEFAULT}"
FROM_SEQUENCE = "sequence default"  # every source of a sequence default starts so
# A dim named with one of these words is a sequence's (unless also with an _OTHER_WORDS one);
# so is any open dim past axis 0 of an integer or boolean input named like ``*_ids``/``*_mask``.
SEQUENCE_WORDS = frozenset(
    ("seq", "sequence", "seqlen", "len", "length", "tokens", "time", "frames")
)
_OTHER_WORDS = frozenset(("past", "total", "cache", "max", "batch"))
_TOKEN_INPUT = re.compile(r"(?:^|_)(?:ids|mask)$")
RANGE_DEFAULT = "default"
MASK_WHY = "a mask"  # how the why of every mask starts (:mod:`.masks`)
MASK_VALUES = "; 0 or 1, at least one 1 a row"

# A dim for --dim and the search: a symbolic name (name, None) or one axis of an input.
DimKey = tuple[str, int | None]


@dataclass(frozen=True)
class Attempt:
    """A variation of the first plan, tried when the original refuses it (see :mod:`.search`):
    another size for the image-default dims, longer sizes for some default dims, or a narrower
    range for the integers no ``--val-range`` sets."""

    number: int = 0
    label: str = "first plan"
    spatial: int | None = None
    lengths: tuple[tuple[DimKey, int], ...] = ()
    integers: tuple[int, int] | None = None

    @property
    def source(self) -> str:
        return f"search attempt {self.number}: {self.label}"


FIRST = Attempt()


@dataclass(frozen=True)
class InputSpec:
    """One generated input: its type, shape, value range, why that range, and where each dim's
    size came from."""

    name: str
    dtype: ir.DataType
    shape: tuple[int, ...]
    low: float
    high: float
    why: str
    shape_from: tuple[str, ...] = ()
    mask: bool = False  # 0s and 1s with at least one 1 a row (:mod:`.masks`)
    start: int | None = None  # positions: start, start + 1, ... along the last axis

    def to_dict(self) -> dict[str, object]:
        bounded = np.isfinite(self.low) and np.isfinite(self.high)
        return {
            "dtype": str(self.dtype.numpy()),  # numpy's name, as every report spells types
            "shape": list(self.shape),
            "range": [self.low, self.high] if bounded else None,
            "why": self.why,
            "shape_from": list(self.shape_from),
        }

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """Values drawn in float64/int64 chunks and stored in the input's own type: the stream
        of one whole-array draw (the same inputs for a seed as ever), without a float64 copy of
        a large input."""
        np_type = self.dtype.numpy()
        low, high = self.low, self.high
        if self.start is not None:
            last = self.shape[-1] if self.shape else 1
            positions = np.arange(self.start, self.start + last).astype(np_type)
            return np.ascontiguousarray(np.broadcast_to(positions, self.shape))
        if np_type.kind in "biu" or self.mask:
            drawn = self._chunks(
                np_type, lambda n: rng.integers(int(low), int(high), n, endpoint=True)
            )
            return one_per_row(drawn) if self.mask and low <= 1 <= high else drawn
        if np_type.kind == "f":
            if not (np.isfinite(low) and np.isfinite(high)):
                return self._chunks(np_type, rng.standard_normal)
            return self._chunks(np_type, lambda n: rng.uniform(low, high, n))
        raise ModelError(
            f"input '{self.name}': cannot generate values of type {self.dtype.name}; "
            "pass inputs with --inputs"
        )

    def _chunks(self, np_type: np.dtype, make: Callable[[int], np.ndarray]) -> np.ndarray:
        out = np.empty(math.prod(self.shape), np_type)
        for start in range(0, out.size, DRAW_CHUNK):
            stop = min(start + DRAW_CHUNK, out.size)
            out[start:stop] = make(stop - start)
        return out.reshape(self.shape)


def one_per_row(mask: np.ndarray) -> np.ndarray:
    """``mask`` with a 1 at the first position of every row (last axis) that has none: a row
    of zeros masks every position."""
    if mask.size:
        rows = mask.reshape(-1, mask.shape[-1]) if mask.ndim else mask.reshape(1, 1)
        rows[~rows.astype(bool).any(axis=-1), 0] = 1
    return mask


def fed_inputs(model: ir.Model) -> list[ir.Value]:
    return [v for v in model.graph.inputs if not v.is_initializer() and v.name]


def dim_key(value: ir.Value, axis: int) -> DimKey:
    """The key the search varies a dim by: its symbolic name, else the input and axis."""
    assert value.shape is not None and value.name is not None
    dim = value.shape[axis]
    if not isinstance(dim, int) and dim.value:
        return (str(dim.value), None)
    return (value.name, axis)


@dataclass(frozen=True)
class Case:
    """One named plan of a model's inputs: :data:`GENERATED` for most models, a decoder's
    prefill and decode step (:mod:`.decoder_inputs`)."""

    name: str
    specs: list[InputSpec]


GENERATED = "generated"


def plan_cases(
    model: ir.Model,
    *,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    attempt: Attempt = FIRST,
) -> list[Case]:
    """What to generate for each fed input of ``model``, in every case it is validated in (see
    the module doc): one, or a decoder's prefill and decode step. ``dims`` keys are symbolic
    names or ``INPUT:AXIS``; a key or range the model cannot take raises
    :class:`InputOptionError`."""
    ranges = dict(val_ranges or {})
    fed = fed_inputs(model)
    by_name = {v.name: v for v in fed}
    unknown = sorted(set(ranges) - set(by_name))
    if unknown:
        raise InputOptionError(
            "--val-range",
            f"names no input of the model: {', '.join(unknown)} "
            f"(its inputs: {', '.join(map(str, by_name)) or 'none'})",
        )
    for value in fed:
        if value.dtype is None or value.shape is None:
            raise ModelError(
                f"input '{value.name}' has no tensor type and shape to generate from; "
                "pass inputs with --inputs"
            )
    bound = _bind_dims(fed, dict(dims or {}))
    signature = decoder_signature(model)
    if signature is None:
        plan = _plan(model, fed, bound, ranges, attempt, sequence_default(model), None)
        return [Case(GENERATED, plan)]
    at_axes = {
        (str(v.name), axis): found
        for v in fed
        for axis in range(len(v.shape or ()))
        if (found := _bound_at(v, axis, bound)) is not None
    }
    sequence = SEQUENCE_DEFAULT, f"{FROM_SEQUENCE} {SEQUENCE_DEFAULT}"
    return [
        Case(case.label, _plan(model, fed, bound, ranges, attempt, sequence, case))
        for case in decoder_cases(signature, at_axes, sequence)
    ]


def plan_inputs(
    model: ir.Model,
    *,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    attempt: Attempt = FIRST,
) -> list[InputSpec]:
    """The first case of :func:`plan_cases` (a decoder's prefill)."""
    return plan_cases(model, dims=dims, val_ranges=val_ranges, attempt=attempt)[0].specs


def _plan(
    model: ir.Model,
    fed: list[ir.Value],
    bound: Mapping[DimKey, tuple[int, str]],
    ranges: Mapping[str, tuple[float, float]],
    attempt: Attempt,
    sequence: tuple[int, str],
    case: DecoderCase | None,
) -> list[InputSpec]:
    pinned, image = _metadata(model)
    roles = case.sizes if case is not None else {}
    shapes: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {}
    for value in fed:
        assert value.name is not None
        shapes[value.name] = _shape(value, bound, pinned, image, sequence, attempt, roles)
        _check_size(value, *shapes[value.name])
    sizes = Sizes(model, {name: shape for name, (shape, _) in shapes.items()})
    plans = []
    for value in fed:
        assert value.name is not None and value.dtype is not None
        shape, shape_from = shapes[value.name]
        role = case.values.get(value.name) if case is not None else None
        start = None
        if value.name in ranges:
            low, high = check_val_range(value.name, value.dtype, *ranges[value.name])
            why = "--val-range"
        elif role is not None and (role.start is not None or role.low == role.high):
            low, high, why, start = role.low, role.high, role.why, role.start
        else:
            low, high, why = _by_use(value, sizes, attempt, role)
        mask = why.startswith(MASK_WHY) and value.name not in ranges
        plans.append(
            InputSpec(value.name, value.dtype, shape, low, high, why, shape_from, mask, start)
        )
    return plans


def _bound_at(
    value: ir.Value, axis: int, bound: Mapping[DimKey, tuple[int, str]]
) -> tuple[int, str] | None:
    """The ``--dim`` size of one axis of an input, by INPUT:AXIS or by its symbolic name."""
    assert value.shape is not None
    dim = value.shape[axis]
    if (value.name, axis) in bound:
        return bound[(str(value.name), axis)]
    if not isinstance(dim, int) and dim.value and (str(dim.value), None) in bound:
        return bound[(str(dim.value), None)]
    return None


def check_input_options(
    model: ir.Model,
    *,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
) -> None:
    """Raise :class:`InputOptionError` if ``model`` cannot take these ``--dim``/``--val-range``
    values; any other trouble with its inputs is validation's to report."""
    try:
        plan_inputs(model, dims=dims, val_ranges=val_ranges)
    except InputOptionError:
        raise
    except ModelError:
        pass


def _bind_dims(fed: list[ir.Value], dims: dict[str, int]) -> dict[DimKey, tuple[int, str]]:
    """``--dim`` keys resolved against the model: (name, None) or (input, axis) -> size, source."""
    names = {str(d.value) for v in fed for d in v.shape or () if not isinstance(d, int) and d.value}
    by_name = {v.name: v for v in fed}
    bound: dict[DimKey, tuple[int, str]] = {}
    for key, size in dims.items():
        source = f"--dim {key}={size}"
        if size < 1:  # the API's dims; the command line refuses them as it parses
            raise InputOptionError("--dim", f"'{key}={size}': a size must be >= 1")
        if key in names:
            bound[(key, None)] = (size, source)
            continue
        input_name, sep, axis_text = key.rpartition(":")
        if not sep or input_name not in by_name:
            inputs = ", ".join(map(str, by_name))
            hint = f"write {key}:AXIS={size} to bind an axis of input '{key}'"
            if not by_name:
                hint = "the model has no inputs to generate"
            elif key not in by_name:
                hint = f"an axis of an input ({inputs}) binds as INPUT:AXIS=VALUE"
            raise InputOptionError(
                "--dim",
                f"'{key}={size}': no input dim of the model is named '{key}' (named dims: "
                f"{', '.join(sorted(names)) or 'none'}); {hint}",
            )
        value = by_name[input_name]
        shape = value.shape
        assert shape is not None
        rank = len(shape)
        if not re.fullmatch(r"[+-]?\d+", axis_text) or not -rank <= int(axis_text) < rank:
            raise InputOptionError(
                "--dim",
                f"'{key}={size}': input '{input_name}' has {rank} axes: AXIS must be an "
                f"integer in [{-rank}, {rank - 1}]",
            )
        axis = int(axis_text) % rank
        fixed = shape[axis]
        if isinstance(fixed, int) and fixed >= 0 and fixed != size:
            raise InputOptionError(
                "--dim",
                f"'{key}={size}': axis {axis} of input '{input_name}' is {fixed} in the model",
            )
        bound[(input_name, axis)] = (size, source)
    return bound


def _metadata(model: ir.Model) -> tuple[dict[str, int], tuple[str, tuple[int, int]] | None]:
    """Dims the metadata pins by name, and an image size (key, (height, width)) if it has one."""
    pinned: dict[str, int] = {}
    image = None
    for key, text in model.metadata_props.items():
        text = text.strip()
        if re.fullmatch(r"\d+", text) and int(text) > 0:
            pinned[key] = int(text)
        if key.lower() in IMAGE_SIZE_KEYS and image is None:
            # "320", "[320, 320]", "(480, 640)", "320,320": height then width
            match = re.fullmatch(r"[\[(]?\s*(\d+)\s*(?:,\s*(\d+)\s*)?[\])]?", text)
            if match and int(match.group(1)) > 0:
                height = int(match.group(1))
                width = int(match.group(2) or height)
                if width > 0:
                    image = (key, (height, width))
    return pinned, image


def sequence_default(model: ir.Model) -> tuple[int, str]:
    """The size of a sequence-like dim and its source: :data:`SEQUENCE_DEFAULT`, or fewer when
    a position table has fewer rows."""
    rows = position_rows(model, fed_inputs(model))
    if rows is not None and rows[0] < SEQUENCE_DEFAULT:
        return rows[0], f"{FROM_SEQUENCE} {SEQUENCE_DEFAULT}, at most {rows[0]}: rows of {rows[1]}"
    return SEQUENCE_DEFAULT, f"{FROM_SEQUENCE} {SEQUENCE_DEFAULT}"


def sequence_like(value: ir.Value, axis: int) -> bool:
    """An open dim that is a sequence's length: never axis 0 (the batch); a dim whose name has
    a word of :data:`SEQUENCE_WORDS` (``seq_len``, ``sequenceLength``, ``num_frames``) and none
    of ``past``, ``total``, ``cache``, ``max``, ``batch`` (a KV cache's or a sum's); else any
    unnamed or other-named dim of an integer or boolean input named ``ids``/``mask`` or
    ``*_ids``/``*_mask`` (``input_ids``, ``attention_mask``, ``token_type_ids``)."""
    assert value.shape is not None
    if axis == 0:
        return False
    dim = value.shape[axis]
    if not isinstance(dim, int) and dim.value:
        spaced = re.sub(r"([a-z])([A-Z])", r"\1_\2", str(dim.value)).lower()
        words = set(re.findall(r"[a-z]+", spaced))
        if words & _OTHER_WORDS:
            return False
        if words & SEQUENCE_WORDS:
            return True
    kind = value.dtype.numpy().kind if value.dtype is not None else ""
    return kind in "biu" and bool(_TOKEN_INPUT.search((value.name or "").lower()))


def _spatial_positions(value: ir.Value) -> tuple[int, ...]:
    shape = value.shape
    if shape is None or len(shape) != 4 or value.dtype is None:
        return ()
    if not value.dtype.is_floating_point():
        return ()
    if isinstance(shape[1], int) and shape[1] in (1, 3, 4):
        return (2, 3)  # NCHW
    if isinstance(shape[3], int) and shape[3] in (1, 3, 4):
        return (1, 2)  # NHWC
    return ()


def _shape(
    value: ir.Value,
    bound: Mapping[DimKey, tuple[int, str]],
    pinned: Mapping[str, int],
    image: tuple[str, tuple[int, int]] | None,
    sequence: tuple[int, str],
    attempt: Attempt,
    roles: Mapping[tuple[str, int], tuple[int, str]],
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    assert value.shape is not None and value.name is not None
    spatial_at = _spatial_positions(value)
    lengths = dict(attempt.lengths)
    shape: list[int] = []
    sources: list[str] = []
    for axis, dim in enumerate(value.shape):
        name = str(dim.value) if not isinstance(dim, int) and dim.value else None
        key = dim_key(value, axis)
        if isinstance(dim, int) and dim >= 0:
            size, source = dim, FROM_MODEL
        elif (value.name, axis) in roles:  # a decoder's lengths, made of --dim and defaults
            size, source = roles[(value.name, axis)]
        elif (value.name, axis) in bound:
            size, source = bound[(value.name, axis)]
        elif name is not None and (name, None) in bound:
            size, source = bound[(name, None)]
        elif name is not None and name in pinned:
            size, source = pinned[name], f"metadata '{name}'"
        elif axis in spatial_at and image is not None:
            size, source = image[1][spatial_at.index(axis)], f"metadata '{image[0]}'"
        elif axis in spatial_at and attempt.spatial is not None:
            size, source = attempt.spatial, attempt.source
        elif axis in spatial_at:
            size, source = SPATIAL_DEFAULT, FROM_IMAGE_DEFAULT
        elif key in lengths:
            size, source = lengths[key], attempt.source
        elif sequence_like(value, axis):
            size, source = sequence
        else:
            size, source = DEFAULT_DIM, FROM_DEFAULT
        shape.append(size)
        sources.append(source)
    return tuple(shape), tuple(sources)


def _check_size(value: ir.Value, shape: tuple[int, ...], sources: tuple[str, ...]) -> None:
    """Refuse an input too large to generate before allocating it."""
    assert value.dtype is not None
    nbytes = math.prod(shape) * value.dtype.bitwidth // 8
    if nbytes <= MAX_INPUT_BYTES:
        return
    text = (
        f"input '{value.name}' would be {value.dtype.numpy().name}"
        f"[{','.join(map(str, shape))}], {size_text(nbytes)}: quantgraph generates at most "
        f"{size_text(MAX_INPUT_BYTES)} per input; bind smaller dims with --dim or pass --inputs"
    )
    if any(source.startswith("--dim") for source in sources):
        raise InputOptionError("--dim", text)
    raise ModelError(text)


def _by_use(
    value: ir.Value, sizes: Sizes, attempt: Attempt, role: Values | None = None
) -> tuple[float, float, str]:
    assert value.dtype is not None and value.name is not None
    low: float
    high: float
    kind = value.dtype.numpy().kind
    mask = mask_reason(value) if kind in "biuf" else None
    if kind == "b":
        return 0, 1, f"{mask}{MASK_VALUES}" if mask else "boolean"
    if kind not in "iuf":
        return -math.inf, math.inf, "standard normal"
    bounds = value_bounds(value, sizes)
    if role is not None:  # a decoder's token ids: inside the vocabulary
        bounds.append((int(role.low), int(role.high), role.why))
    if mask is not None:  # first: its why starts the input's
        bounds.insert(0, (0, 1, f"{mask}{MASK_VALUES}"))
    if not bounds:
        if kind == "f":
            return -math.inf, math.inf, "standard normal"
        (low, high), why = INTEGER_RANGE, RANGE_DEFAULT
    else:
        low, high = max(b[0] for b in bounds), min(b[1] for b in bounds)
        if low > high:
            raise ModelError(f"input '{value.name}': its uses ask for no common range ({bounds})")
        why = "; ".join(dict.fromkeys(b[2] for b in bounds))
    type_low, type_high = type_range(value.dtype)
    low, high = max(low, type_low), min(high, type_high)
    if low > high:
        raise ModelError(
            f"input '{value.name}': its uses ask for [{low:g}, {high:g}], which its type "
            f"{value.dtype.numpy().name} cannot hold; pass inputs with --inputs"
        )
    if attempt.integers is not None and kind in "iu":
        narrow_low, narrow_high = max(low, attempt.integers[0]), min(high, attempt.integers[1])
        if narrow_low <= narrow_high and (narrow_low, narrow_high) != (low, high):
            why = f"{why}, narrowed by {attempt.source}"
            low, high = narrow_low, narrow_high
    return low, high, why


def draw(specs: Sequence[InputSpec], seed: int) -> dict[str, np.ndarray]:
    """One sample of every planned input from ``seed``."""
    rng = np.random.default_rng(seed)
    return {spec.name: spec.draw(rng) for spec in specs}


def describe_feeds(feeds: Mapping[str, np.ndarray]) -> str:
    """``x: float32[1,3,224,224], ids: int64[1,16]`` for messages."""
    return ", ".join(f"{k}: {v.dtype}[{','.join(map(str, v.shape))}]" for k, v in feeds.items())


def describe_shape(shape: list[int], shape_from: list[str]) -> str:
    """Where the sizes the model leaves open came from: ``axis 0 = 1 (default 1), axes 2, 3 =
    320 (metadata 'imgsz')``; empty when the model fixes every dim."""
    groups: dict[tuple[int, str], list[int]] = {}
    for axis, (size, source) in enumerate(zip(shape, shape_from, strict=False)):
        if source != FROM_MODEL:
            groups.setdefault((size, source), []).append(axis)
    parts = []
    for (size, source), axes in groups.items():
        label = "axis" if len(axes) == 1 else "axes"
        parts.append(f"{label} {', '.join(map(str, axes))} = {size} ({source})")
    return ", ".join(parts)


def is_default(source: str) -> bool:
    """Whether a ``shape_from`` entry is a default (not the model, an option, metadata or a
    search attempt)."""
    return source in (FROM_DEFAULT, FROM_IMAGE_DEFAULT) or source.startswith(FROM_SEQUENCE)


def defaulted_dims(inputs: Mapping[str, Mapping[str, object]]) -> list[tuple[str, int, int, str]]:
    """Every dim a default sized, as (input, axis, size, where the size came from):
    ``("input_ids", 1, 128, "sequence default 128")``; empty when none did."""
    found = []
    for name, spec in inputs.items():
        shape, shape_from = spec.get("shape"), spec.get("shape_from")
        if not isinstance(shape, list) or not isinstance(shape_from, list):
            continue  # inputs from files
        for axis, (size, source) in enumerate(zip(shape, shape_from, strict=False)):
            if is_default(str(source)):
                found.append((name, axis, int(size), str(source)))
    return found
