"""Negative dim values (Paddle2ONNX declares ``-1`` for a dynamic dim) become unknown dims
(:func:`quantgraph.ir.shape_inference.negative_dims_unknown` does the same on a serialized copy).

ONNX says nothing of a dim value below 0, and its C++ shape inference trusts them: a ``-1`` that
reaches Slice's inference trips a ``std::clamp`` assertion that aborts the whole process (onnx
1.23 wheels, during ``onnx.checker.check_model(full_check=True)``). onnxruntime reads them as
unknown; so does quantgraph, by writing them as dims with neither value nor name.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx_ir as ir

from ..ir.walk import all_graphs


def _declared_values(model: ir.Model) -> Iterator[ir.Value]:
    for graph in all_graphs(model):
        yield from graph.inputs
        yield from graph.outputs
        for node in graph:
            yield from (v for v in node.outputs if v is not None)


def _negative(shape: ir.Shape | None) -> bool:
    return shape is not None and any(isinstance(d, int) and d < 0 for d in shape)


class UnknownDimsPass(ir.passes.InPlacePass):
    """Every negative dim value of a declared shape becomes an unnamed unknown dim."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for value in _declared_values(model):
            shape = value.shape
            if shape is not None and _negative(shape):
                value.shape = ir.Shape(
                    [None if isinstance(d, int) and d < 0 else d for d in shape],
                    denotations=[shape.get_denotation(i) for i in range(shape.rank())],
                )
                modified = True
        return ir.passes.PassResult(model, modified=modified)
