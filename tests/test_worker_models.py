"""A candidate's model saved for a worker process: weights in files referred to, not copied;
weights made in memory written once (quantgraph.runtime.worker_models)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

from quantgraph.runtime.weights_by_reference import SMALLEST
from quantgraph.runtime.worker_models import (
    OWN_DATA,
    NotByReference,
    load_by_reference,
    save_by_reference,
)


def _in_file(folder: Path, offset: int, array: np.ndarray, name: str) -> ir.ExternalTensor:
    """``array`` as stored at ``offset`` of ``folder/w.data``."""
    shape = ir.Shape(list(array.shape))
    return ir.ExternalTensor(
        "w.data",
        offset,
        array.nbytes,
        ir.DataType.FLOAT,
        shape=shape,
        name=name,
        base_dir=str(folder),
    )


def _model(tmp_path: Path) -> tuple[ir.Model, dict[str, np.ndarray]]:
    """x + on_disk + in_memory + small: one weight in a file of the original's folder, one
    made in memory (over SMALLEST), one small."""
    rng = np.random.default_rng(0)
    arrays = {
        "on_disk": rng.standard_normal(SMALLEST // 4 + 3).astype(np.float32),
        "in_memory": rng.standard_normal(SMALLEST // 4 + 5).astype(np.float32),
        "small": rng.standard_normal(4).astype(np.float32),
    }
    original = tmp_path / "original"
    original.mkdir()
    (original / "w.data").write_bytes(b"\1" * 7 + arrays["on_disk"].tobytes())
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1]))
    tensors: dict[str, ir.TensorProtocol] = {
        "on_disk": _in_file(original, 7, arrays["on_disk"], "on_disk"),
        "in_memory": ir.tensor(arrays["in_memory"], name="in_memory"),
        "small": ir.tensor(arrays["small"], name="small"),
    }
    values = [
        ir.Value(
            name=n,
            const_value=t,
            shape=ir.Shape(list(arrays[n].shape)),
            type=ir.TensorType(ir.DataType.FLOAT),
        )
        for n, t in tensors.items()
    ]
    nodes = [ir.node("ReduceSum", [v], num_outputs=1) for v in values]
    total = ir.node("Sum", [x, *(n.outputs[0] for n in nodes)], num_outputs=1)
    graph = ir.Graph(
        [x], total.outputs, nodes=[*nodes, total], initializers=values, opset_imports={"": 21}
    )
    return ir.Model(graph, ir_version=10), arrays


def test_file_weights_referred_to_memory_weights_written_once(tmp_path: Path) -> None:
    model, arrays = _model(tmp_path)
    before = {n: v.const_value for n, v in model.graph.initializers.items()}
    folder = tmp_path / "worker"
    folder.mkdir()
    folders = save_by_reference(model, folder)
    assert folders == {"w.data": str(tmp_path / "original")}
    # the model is as it was; only the weight made in memory was written
    assert {n: v.const_value for n, v in model.graph.initializers.items()} == before
    assert (folder / OWN_DATA).stat().st_size == arrays["in_memory"].nbytes
    loaded = load_by_reference(folder, folders)
    for name, array in arrays.items():
        tensor = loaded.graph.initializers[name].const_value
        assert tensor is not None
        np.testing.assert_array_equal(tensor.numpy(), array)
    kinds = {n: type(v.const_value).__name__ for n, v in loaded.graph.initializers.items()}
    assert kinds["on_disk"] == kinds["in_memory"] == "ExternalTensor"
    on_disk = loaded.graph.initializers["on_disk"].const_value
    assert isinstance(on_disk, ir.ExternalTensor)
    assert Path(on_disk.path) == tmp_path / "original" / "w.data"  # the original's file


def test_one_location_in_two_folders_is_not_by_reference(tmp_path: Path) -> None:
    model, arrays = _model(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "w.data").write_bytes(arrays["on_disk"].tobytes())
    extra = ir.Value(
        name="again",
        const_value=_in_file(other, 0, arrays["on_disk"], "again"),
    )
    model.graph.register_initializer(extra)
    folder = tmp_path / "worker"
    folder.mkdir()
    with pytest.raises(NotByReference, match=r"w\.data"):
        save_by_reference(model, folder)
    assert isinstance(model.graph.initializers["in_memory"].const_value, ir.Tensor)
