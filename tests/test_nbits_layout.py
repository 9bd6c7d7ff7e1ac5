"""The vectorized re-packing of MatMulNBits' and GatherBlockQuantized's weights
(nbits_layout.standard_weight, unpacked_rows) against their plain definition: unpack, transpose,
shift by MatMulNBits' implicit zero point, pack as onnx-ir packs a 4-bit tensor. Shapes with
short last blocks, odd N, 4 and 8 bits, with and without zero points, in one step or in many
small ones; and whole conversions, in memory and from external data, against the same."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

import quantgraph
from quantgraph.errors import ModelError
from quantgraph.passes.contrib import nbits_layout as layout
from tests import published


def _reference(packed: np.ndarray, n: int, padded: int, bits: int, signed: bool) -> bytes:
    """What the conversion wrote before it was vectorized: the plain definition."""
    values = layout.unpack(packed.reshape(n, padded * bits // 8), bits, padded).T  # [Kp, N]
    if signed:
        shifted = values.astype(np.int16) - layout.default_zero_point(bits)
        return ir.tensor(shifted.astype(layout.signed_type(bits))).tobytes()
    return ir.tensor(values.astype(layout.unsigned_type(bits))).tobytes()


@st.composite
def _weights(draw: st.DrawFn) -> tuple[np.ndarray, int, int, int]:
    """(B bytes, N, padded K, bits): K any, padded to whole blocks (a short last block)."""
    bits = draw(st.sampled_from([4, 8]))
    # onnxruntime's blocks are powers of 2 from 16; smaller ones take the byte-wise paths
    block = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]).filter(lambda b: b * bits % 8 == 0))
    k = draw(st.integers(1, 3 * block + 1))
    n = draw(st.integers(1, 40))  # odd N and N = 1 included
    padded = -(-k // block) * block
    seed = draw(st.integers(0, 2**32 - 1))
    packed = np.random.default_rng(seed).integers(0, 256, n * padded * bits // 8, np.uint8)
    return packed, n, padded, bits


@settings(max_examples=300, deadline=None)
@given(_weights(), st.booleans(), st.sampled_from([1, 64, 1000, layout.CHUNK_BYTES]))
def test_standard_weight_is_the_plain_unpack_transpose_pack(
    weights: tuple[np.ndarray, int, int, int], signed: bool, chunk: int
) -> None:
    packed, n, padded, bits = weights
    before = packed.copy()
    got = layout.standard_weight(packed, n, padded, bits, signed, chunk=chunk)
    assert got.dtype == np.uint8
    assert got.tobytes() == _reference(packed, n, padded, bits, signed)
    assert np.array_equal(packed, before)  # B is read only (it may be a read-only map)


@settings(max_examples=200, deadline=None)
@given(_weights(), st.booleans(), st.sampled_from([1, 64, layout.CHUNK_BYTES]))
def test_matmul_nbits_bytes_gives_b_back(
    weights: tuple[np.ndarray, int, int, int], signed: bool, chunk: int
) -> None:
    """Lowering's inverse: B's bytes back from the standard tensor's, padding included."""
    packed, n, padded, bits = weights
    standard = layout.standard_weight(packed, n, padded, bits, signed)
    back = layout.matmul_nbits_bytes(standard, n, padded, bits, signed, chunk=chunk)
    assert back.tobytes() == packed.tobytes()


def test_standard_weight_reads_a_read_only_unaligned_map() -> None:
    """External data maps a file read-only at any offset: the word path takes it as it is."""
    n, padded = 24, 64
    raw = np.random.default_rng(3).integers(0, 256, 1 + n * padded // 2, np.uint8).tobytes()
    packed = np.frombuffer(raw, np.uint8, offset=1)
    assert not packed.flags.writeable
    got = layout.standard_weight(packed, n, padded, 4, True)
    assert got.tobytes() == _reference(packed, n, padded, 4, True)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([4, 8]),
    st.integers(1, 5),
    st.integers(1, 40),
    st.integers(0, 40),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_unpacked_rows_is_unpack_shift_and_pad(
    bits: int, rows: int, width: int, extra: int, signed: bool, seed: int
) -> None:
    packed = np.random.default_rng(seed).integers(0, 256, (rows, width), np.uint8)
    count = width * 8 // bits
    want = layout.unpack(packed, bits, count).astype(np.int16)
    if signed:
        want -= layout.default_zero_point(bits)
    want = np.pad(want, [(0, 0), (0, extra)]).astype(np.int8 if signed else np.uint8)
    got = layout.unpacked_rows(packed, bits, count + extra, signed)
    assert got.tobytes() == want.tobytes()


@st.composite
def _models(draw: st.DrawFn) -> onnx.ModelProto:
    bits = draw(st.sampled_from([4, 8]))
    block = draw(st.sampled_from([16, 32]))
    k = draw(st.integers(1, 2 * block + 1))
    n = draw(st.integers(1, 20))
    zero_points = draw(st.sampled_from(["absent", "packed", "typed"]))
    return published.matmul_nbits(k, n, block, bits, zero_points=zero_points)


def _converted_weight(model: onnx.ModelProto) -> tuple[bytes, bytes]:
    """(the reference's bytes of q, the conversion's) for ``published.matmul_nbits``'s node."""
    node = model.graph.node[0]
    attrs = {a.name: a.i for a in node.attribute}
    n, bits, block = attrs["N"], attrs["bits"], attrs["block_size"]
    padded = -(-attrs["K"] // block) * block
    packed = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "B"))
    signed = len(node.input) < 4 or node.input[3] == ""
    converted = quantgraph.convert(model).proto
    q = next(t for t in converted.graph.initializer if t.name.startswith("B_"))
    return _reference(packed, n, padded, bits, signed), q.raw_data


@settings(max_examples=40, deadline=None)
@given(_models())
def test_conversion_writes_the_reference_bytes(model: onnx.ModelProto) -> None:
    want, got = _converted_weight(model)
    assert got == want


def _save_external(model: onnx.ModelProto, folder: Path) -> Path:
    path = folder / "model.onnx"
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # onnx.save moves the proto's own tensors out
    onnx.save(copy, path, save_as_external_data=True, location="model.data", size_threshold=0)
    return path


EXTERNAL: dict[str, tuple[Callable[[], onnx.ModelProto], set[str]]] = {
    "matmul_nbits-u4-packed-zp-bias": (
        lambda: published.matmul_nbits(56, 24, 16, 4, zero_points="packed", bias=True),
        {"B_u4", "scales_t"},
    ),
    "matmul_nbits-s8-odd-n": (lambda: published.matmul_nbits(40, 7, 16, 8), {"B_s8", "scales_t"}),
    "gather_block_quantized-uint8": (
        lambda: published.gather_block_quantized(56, 16, 4),
        {"q_s4_8bit"},
    ),
    "gather_block_quantized-int4-zp": (
        lambda: published.gather_block_quantized(40, 16, data="int4", zero_points=True),
        {"q_s4_8bit"},
    ),
}


@pytest.mark.parametrize("case", EXTERNAL)
def test_external_weights_are_derived_and_written_as_in_memory(tmp_path: Path, case: str) -> None:
    """From external data the converted weights are read only when written (derived
    tensors), and the file holds what the in-memory conversion holds."""
    make, lazy = EXTERNAL[case]
    model = make()
    result = quantgraph.convert(_save_external(model, tmp_path))
    initializers = result.model.graph.initializers
    derived = {n for n, v in initializers.items() if isinstance(v.const_value, ir.LazyTensor)}
    assert derived == lazy
    out = result.save(tmp_path / "out" / "converted.onnx")
    written = onnx.load(out)
    in_memory = quantgraph.convert(model).proto
    want = {t.name: numpy_helper.to_array(t).tobytes() for t in in_memory.graph.initializer}
    got = {t.name: numpy_helper.to_array(t).tobytes() for t in written.graph.initializer}
    assert got == want


@pytest.mark.parametrize("case", [c for c in EXTERNAL if c.startswith("matmul_nbits")])
def test_lowering_from_external_data_gives_the_weights_back(tmp_path: Path, case: str) -> None:
    """Converted weights on disk lower to B and scales derived when written: the original's
    bytes."""
    model = EXTERNAL[case][0]()
    converted = quantgraph.convert(_save_external(model, tmp_path)).save(tmp_path / "c" / "c.onnx")
    back = quantgraph.lower(converted)
    derived = {
        n
        for n, v in back.model.graph.initializers.items()
        if isinstance(v.const_value, ir.LazyTensor)
    }
    assert "B" in derived <= {"B", "scales"}  # scales under 1 KiB are written in the graph
    written = onnx.load(back.save(tmp_path / "b" / "b.onnx"))
    want = {t.name: numpy_helper.to_array(t).tobytes() for t in model.graph.initializer}
    got = {t.name: numpy_helper.to_array(t).tobytes() for t in written.graph.initializer}
    assert got == want


def test_an_input_gone_before_saving_is_one_clear_error(tmp_path: Path) -> None:
    """Derived weights read IN's data file when written: a file removed since is named, and
    nothing is written."""
    result = quantgraph.convert(_save_external(published.matmul_nbits(56, 24, 16, 4), tmp_path))
    (tmp_path / "model.data").unlink()
    with pytest.raises(ModelError, match=r"model\.data: cannot read the weights 'B'.*must stay"):
        result.save(tmp_path / "out.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_no_room_to_read_the_weights_says_out_of_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOMEM mapping the weights (`ulimit -v`) is not a file gone: it says out of memory."""
    from quantgraph.ir import derived_tensors

    result = quantgraph.convert(_save_external(published.matmul_nbits(56, 24, 16, 4), tmp_path))

    def no_room(tensor: ir.TensorProtocol) -> np.ndarray:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(derived_tensors, "stored_array", no_room)
    with pytest.raises(
        ModelError, match=r"model\.data: out of memory reading the weights 'B'"
    ) as e:
        result.save(tmp_path / "out.onnx")
    assert "must stay" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.data", "model.onnx"]
