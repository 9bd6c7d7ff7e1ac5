"""Inputs read from files (``--inputs``), checked against the model before anything runs.

A file is numpy's ``.npz`` (arrays by input name, ``np.savez``) or, for a model with one fed
input, ``.npy`` (one array, ``np.save``); the format is read from the file's first bytes, not
its name. A directory stands for every ``.npz`` and ``.npy`` file in it, in name order; each
file is one sample. Object arrays are refused (``allow_pickle`` stays off: loading them could
run code). What a file holds must match the model's inputs by name, dtype, rank and fixed dims;
otherwise one line says which file, which input and how they differ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir

from ...errors import ModelError
from ...ir.name_groups import described_once, names_once

SUFFIXES = (".npz", ".npy")
_NPZ_MAGIC, _NPY_MAGIC = b"PK\x03\x04", b"\x93NUMPY"
# What ``--inputs`` (and validate's ``inputs``) may be: a mapping, an .npz or .npy, several, or a
# directory of them.
Given = Mapping[str, np.ndarray] | str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


@dataclass(frozen=True)
class Expected:
    """A fed input of a model: name, numpy dtype (None: one numpy has no name for) and shape
    (None for a symbolic dim)."""

    name: str
    dtype: str | None
    shape: tuple[int | None, ...] | None

    @property
    def type_text(self) -> str:
        """``float32[1,3,?,?]`` (``?``: a symbolic dim, or an unknown type or shape)."""
        dims = (
            "?"
            if self.shape is None
            else ",".join("?" if d is None else str(d) for d in self.shape)
        )
        return f"{self.dtype or '?'}[{dims}]"

    def __str__(self) -> str:
        return f"{self.name}: {self.type_text}"


def described_given(sample: Mapping[str, np.ndarray]) -> dict[str, dict[str, object]]:
    """A sample read from ``--inputs`` as reports describe its inputs (the JSON schemas'
    ``given_input``; generated ones say more: :func:`.generated.described`)."""
    return {
        name: {"dtype": str(array.dtype), "shape": list(array.shape), "from": "--inputs"}
        for name, array in sample.items()
    }


def expected_inputs(model: ir.Model) -> list[Expected]:
    """The fed inputs of ``model`` (initializers with a default are not asked for)."""
    found = []
    for value in model.graph.inputs:
        if value.is_initializer() or not value.name:
            continue
        shape = None
        if value.shape is not None:
            # a -1 dim (Paddle2ONNX writes them) is as unknown as a symbolic one
            shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in value.shape)
        found.append(Expected(value.name, _numpy_name(value.dtype), shape))
    return found


def files_of(inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The sample files ``inputs`` names: files as given, directories expanded."""
    paths = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found = sorted(p for p in entry.iterdir() if p.suffix.lower() in SUFFIXES)
            if not found:
                raise ModelError(f"{entry}: the directory has no .npz or .npy files")
            files.extend(found)
        else:
            files.append(entry)
    return files


def samples(
    inputs: Given, expected: Sequence[Expected] | None
) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(where each sample came from, the sample), checked against ``expected`` when given."""
    if isinstance(inputs, Mapping):
        sample = dict(inputs)
        if expected is not None:
            check(sample, expected, "inputs")
        return [("inputs", sample)]
    return [(str(path), read(path, expected)) for path in files_of(inputs)]


def read(
    path: str | os.PathLike[str], expected: Sequence[Expected] | None
) -> dict[str, np.ndarray]:
    """One sample from ``path``, checked against ``expected`` when given (the module doc)."""
    path = Path(path)
    try:
        with open(path, "rb") as stream:
            magic = stream.read(6)
    except OSError as error:
        raise ModelError(f"{path}: cannot read inputs ({error.strerror or error})") from None
    if magic.startswith(_NPY_MAGIC):
        feeds = _read_npy(path, expected)
    elif magic.startswith(_NPZ_MAGIC):
        feeds = _read_npz(path)
    else:
        raise ModelError(
            f"{path}: not an .npz or .npy file (inputs are numpy's formats: np.savez with one "
            "array per input name, or np.save for a model with one input)"
        )
    if expected is not None:
        check(feeds, expected, str(path))
    return feeds


def _read_npy(path: Path, expected: Sequence[Expected] | None) -> dict[str, np.ndarray]:
    if expected is None:
        raise ModelError(f"{path}: a .npy file holds one unnamed array: name it with an .npz")
    if len(expected) != 1:
        names = ", ".join(e.name for e in expected) or "none"
        raise ModelError(
            f"{path}: a .npy file holds one array, but the model has {len(expected)} inputs "
            f"({names}): pass an .npz with one array per input name (np.savez)"
        )
    array = _load(path, expected[0].name)
    assert isinstance(array, np.ndarray)
    return {expected[0].name: array}


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    data = _load(path, None)
    assert isinstance(data, np.lib.npyio.NpzFile)
    with data:
        return {name: _member(path, data, name) for name in data.files}


def _load(path: Path, name: str | None) -> object:
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise ModelError(_objects(path, name)) from None
        raise ModelError(f"{path}: cannot read inputs ({error})") from None
    except Exception as error:  # a damaged zip or header: numpy's and zipfile's words
        raise ModelError(f"{path}: cannot read inputs ({error})") from None


def _member(path: Path, data: np.lib.npyio.NpzFile, name: str) -> np.ndarray:
    try:
        array: np.ndarray = data[name]
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise ModelError(_objects(path, name)) from None
        raise ModelError(f"{path}: cannot read array {name!r} ({error})") from None
    except Exception as error:
        raise ModelError(f"{path}: cannot read array {name!r} ({error})") from None
    return array


def _objects(path: Path, name: str | None) -> str:
    which = f"array {name!r}" if name else "the array"
    return (
        f"{path}: {which} holds Python objects (dtype object); inputs must be arrays of "
        "numbers or booleans"
    )


def check(feeds: Mapping[str, np.ndarray], expected: Sequence[Expected], source: str) -> None:
    """Refuse feeds that do not fit the model's inputs, naming the input and the difference."""
    wanted = {e.name: e for e in expected}
    # a decoder's KV cache (64 inputs) as one item: the line stays a line
    listed = described_once((e.name, e.type_text) for e in expected) or "none"
    missing = [name for name in wanted if name not in feeds]
    if missing:
        held = names_once(feeds) or "no arrays"
        raise ModelError(
            f"{source}: no array for input {_names(missing)} (the file holds {held}; the model's "
            f"inputs: {listed})"
        )
    extra = [name for name in feeds if name not in wanted]
    if extra:
        raise ModelError(
            f"{source}: array {_names(extra)} names no input of the model (its inputs: {listed})"
        )
    for name, array in feeds.items():
        want = wanted[name]
        got = f"{array.dtype}[{','.join(map(str, array.shape))}]"
        if want.dtype is not None and str(array.dtype) != want.dtype:
            raise ModelError(
                f"{source}: input '{name}' is {got}; the model expects {want.type_text} "
                "(inputs are not converted)"
            )
        if want.shape is None:
            continue
        if array.ndim != len(want.shape):
            raise ModelError(
                f"{source}: input '{name}' is {got} (rank {array.ndim}); the model expects rank "
                f"{len(want.shape)} ({want.type_text})"
            )
        for axis, (size, fixed) in enumerate(zip(array.shape, want.shape, strict=True)):
            if fixed is not None and size != fixed:
                raise ModelError(
                    f"{source}: input '{name}' is {got}; the model expects {want.type_text} "
                    f"(dim {axis} is {size}, not {fixed})"
                )


def _names(names: Sequence[str]) -> str:
    return names_once(names, quote="'")


def _numpy_name(dtype: ir.DataType | None) -> str | None:
    if dtype is None:
        return None
    try:
        return str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(dtype))))
    except (KeyError, TypeError, ValueError):
        return None


def signature_differences(
    original: ir.Model, rewritten: ir.Model, original_label: str, rewritten_label: str
) -> list[str]:
    """How the fed inputs of two models differ (names, dtypes, ranks); empty when they match.

    The two sides of a validation are one model in two forms: anything else would only fail
    later, in onnxruntime's words about one side."""
    ours = {e.name: e for e in expected_inputs(original)}
    theirs = {e.name: e for e in expected_inputs(rewritten)}
    found = []
    for name, one in ours.items():
        other = theirs.get(name)
        if other is None:
            found.append(f"input '{name}' ({one}) is only in {original_label}")
        elif one.dtype != other.dtype or (
            one.shape is not None and other.shape is not None and len(one.shape) != len(other.shape)
        ):
            found.append(
                f"input '{name}' is {_typed(one)} in {original_label} but {_typed(other)} in "
                f"{rewritten_label}"
            )
    found += [
        f"input '{name}' ({other}) is only in {rewritten_label}"
        for name, other in theirs.items()
        if name not in ours
    ]
    return found


def _typed(value: Expected) -> str:
    rank = "unknown rank" if value.shape is None else f"rank {len(value.shape)}"
    return f"{value.type_text} ({rank})"
