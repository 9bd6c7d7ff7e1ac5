"""The text a oneDNN Graph partition is described by (docs: /work/partition-contract.md, §1):
logical tensors and ops, one a line, parsed by libquantgraph_onednn at plan time and in the
OneDnnPartition kernel.

    qgpart 1
    tensor <id> <dtype> <var|const> <dims>
    op <id> <Kind> in=<id>,... out=<id>,... [<attr>=<t>:<v>,<v>,...]
    inputs <id> ...
    outputs <id> ...

Data only: what an op or tensor is, and how it is written. Floats are written with
``float.hex`` so the C++ side reads back the same float32 bits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

HEADER = "qgpart 1"

# ONNX element type -> oneDNN's data type name; every other type has no logical tensor.
DTYPES: dict[ir.DataType, str] = {
    ir.DataType.FLOAT: "f32",
    ir.DataType.FLOAT16: "f16",
    ir.DataType.BFLOAT16: "bf16",
    ir.DataType.INT8: "s8",
    ir.DataType.UINT8: "u8",
    ir.DataType.INT32: "s32",
    ir.DataType.INT4: "s4",
    ir.DataType.UINT4: "u4",
    ir.DataType.BOOL: "boolean",
}

Dims = tuple[int | None, ...] | None  # None: unknown rank; None inside: unknown dim
AttrValue = tuple[str, tuple[object, ...]]  # (type letter i/f/s/b, values)


@dataclass(frozen=True)
class Tensor:
    id: int
    dtype: str
    const: bool
    dims: Dims

    def line(self) -> str:
        if self.dims is None:
            dims = "-"
        else:
            dims = ",".join("?" if d is None else str(d) for d in self.dims)
        return f"tensor {self.id} {self.dtype} {'const' if self.const else 'var'} {dims}"

    @property
    def known(self) -> bool:
        """Every dim known (what a compile check needs)."""
        return self.dims is not None and all(d is not None for d in self.dims)


@dataclass(frozen=True)
class Op:
    id: int
    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    attrs: tuple[tuple[str, AttrValue], ...] = ()

    def line(self) -> str:
        parts = [
            f"op {self.id} {self.kind}",
            "in=" + ",".join(map(str, self.inputs)),
            "out=" + ",".join(map(str, self.outputs)),
        ]
        parts += [f"{name}={_attr_text(value)}" for name, value in self.attrs]
        return " ".join(parts)

    def attr(self, name: str) -> tuple[object, ...] | None:
        for key, (_, values) in self.attrs:
            if key == name:
                return values
        return None


def ints(values: Iterable[int]) -> AttrValue:
    return ("i", tuple(int(v) for v in values))


def floats(values: Iterable[float]) -> AttrValue:
    return ("f", tuple(float(np.float32(v)) for v in values))


def string(value: str) -> AttrValue:
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"a description string attribute cannot be {value!r}")
    return ("s", (value,))


def boolean(value: bool) -> AttrValue:
    return ("b", (int(bool(value)),))


def _attr_text(value: AttrValue) -> str:
    kind, values = value
    if kind == "f":
        text = ",".join(float(v).hex() for v in values)  # type: ignore[arg-type]
    else:
        text = ",".join(str(v) for v in values)
    return f"{kind}:{text}"


def text(
    tensors: Sequence[Tensor],
    ops: Sequence[Op],
    inputs: Sequence[int] | None = None,
    outputs: Sequence[int] | None = None,
) -> str:
    """The description: header, tensors, ops, then the partition's inputs and outputs (left
    out of a whole-graph query)."""
    lines = [HEADER, *(t.line() for t in tensors), *(o.line() for o in ops)]
    if inputs is not None:
        lines.append(" ".join(["inputs", *map(str, inputs)]))
    if outputs is not None:
        lines.append(" ".join(["outputs", *map(str, outputs)]))
    return "\n".join(lines) + "\n"


def with_input_dims(text: str, inputs: Iterable[int], size: int) -> str | None:
    """``text`` with every unknown dim of the tensors ``inputs`` set to ``size`` (what a
    compile needs: oneDNN infers the rest), or None when one of them has an unknown rank."""
    wanted = {str(t) for t in inputs}
    lines = text.split("\n")
    for index, line in enumerate(lines):
        words = line.split(" ")
        if len(words) != 5 or words[0] != "tensor" or words[1] not in wanted:
            continue
        if words[4] == "-":
            return None
        words[4] = ",".join(str(size) if d == "?" else d for d in words[4].split(","))
        lines[index] = " ".join(words)
    return "\n".join(lines)
