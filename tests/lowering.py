"""The published formats' round trip: ``lower(convert(m))`` gives back m's nodes and weights."""

from __future__ import annotations

import onnx

import quantgraph


def initializer_bytes(model: onnx.ModelProto) -> dict[str, bytes]:
    return {t.name: t.SerializeToString() for t in model.graph.initializer}


def assert_lowers_to_the_original(original: onnx.ModelProto, converted: onnx.ModelProto) -> None:
    """``converted`` lowers with nothing skipped to ``original``'s nodes (op type and domain
    first, for a readable failure; then name, inputs, attributes, outputs) and byte-identical
    initializers."""
    lowered = quantgraph.lower(converted)
    assert lowered.report.skipped == []
    back = lowered.proto
    assert [(n.op_type, n.domain) for n in back.graph.node] == [
        (n.op_type, n.domain) for n in original.graph.node
    ]
    for got, want in zip(back.graph.node, original.graph.node, strict=True):
        assert got.SerializeToString() == want.SerializeToString(), (got, want)
    assert initializer_bytes(back) == initializer_bytes(original)
