"""A model's fingerprint (quantgraph.ir.fingerprint): equal exactly when the models compute
alike, a weight in external data hashed by where it lies and a derived weight by its
computation and sources: neither is read (a 1.1B decoder's candidate plans hashed in seconds)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx_ir as ir

from quantgraph.ir.derived_tensors import DerivedTensor
from quantgraph.ir.fingerprint import fingerprint

COMPUTED: list[int] = []


def _scaled(factor: int, values: np.ndarray) -> np.ndarray:
    COMPUTED.append(factor)
    return values * np.float32(factor)


def _model(weight: ir.TensorProtocol) -> ir.Model:
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    w = ir.Value(
        name="w", const_value=weight, type=ir.TensorType(weight.dtype), shape=ir.Shape([2])
    )
    node = ir.node("Mul", [x, w], num_outputs=1)
    node.outputs[0].name = "y"
    graph = ir.Graph([x], node.outputs, nodes=[node], initializers=[w], opset_imports={"": 21})
    return ir.Model(graph, ir_version=10)


def _external(tmp_path: Path, values: np.ndarray, offset: int = 0) -> ir.ExternalTensor:
    data = tmp_path / "w.data"
    with open(data, "ab") as stream:
        stream.seek(offset)
        stream.write(values.tobytes())
    shape = ir.Shape([2])
    return ir.ExternalTensor("w.data", offset, values.nbytes, ir.DataType.FLOAT, shape=shape,
                             name="w", base_dir=str(tmp_path))  # fmt: skip


def test_a_derived_weight_is_hashed_by_its_computation_without_computing_it(
    tmp_path: Path,
) -> None:
    source = _external(tmp_path, np.array([1, 2], np.float32))

    def counted(factor: int) -> functools.partial[np.ndarray]:
        return functools.partial(_scaled, factor)

    def derived(factor: int) -> DerivedTensor:
        return DerivedTensor(counted(factor), [source], ir.DataType.FLOAT, [2], name="w")

    twice = fingerprint(_model(derived(2)))
    assert fingerprint(_model(derived(2))) == twice
    assert fingerprint(_model(derived(3))) != twice  # another argument
    other = _external(tmp_path, np.array([1, 5], np.float32), offset=8)
    moved = DerivedTensor(counted(2), [other], ir.DataType.FLOAT, [2], name="w")
    assert fingerprint(_model(moved)) != twice  # another source
    in_memory = ir.Tensor(np.array([2, 4], np.float32), name="w")
    # hashed by how it is made: the same values in memory differ (timed twice, never confused)
    assert fingerprint(_model(in_memory)) != twice
    assert COMPUTED == []


def test_a_derived_weight_of_unknown_computation_is_hashed_by_its_values(tmp_path: Path) -> None:
    source = _external(tmp_path, np.array([1, 2], np.float32))
    a = DerivedTensor(lambda v: v * 2, [source], ir.DataType.FLOAT, [2], name="w")
    b = DerivedTensor(lambda v: v + v, [source], ir.DataType.FLOAT, [2], name="w")
    c = DerivedTensor(lambda v: v * 3, [source], ir.DataType.FLOAT, [2], name="w")
    assert fingerprint(_model(a)) == fingerprint(_model(b)) != fingerprint(_model(c))
