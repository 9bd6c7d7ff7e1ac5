"""The published formats (issue #34) inside If branches and a Loop body: MatMulNBits,
quantize_dynamic's MatMulInteger/ConvInteger, QOperator QLinear*, Cast x scale. Each form's
weights are initializers of the outer graph (captured from outer scope), initializers of the
body, or Constant nodes in the body. ``convert`` rewrites every copy as it does the main graph,
the converted model computes what onnxruntime (unoptimized) computes on the original (bit for
bit; the integer ops within their documented bound), and ``lower`` gives back the original
nodes and initializers of every graph, where they were.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import quantgraph
from quantgraph.ir.walk import proto_graphs
from quantgraph.testing import ort_session
from tests import nested_forms, producers, published
from tests.builders import requires_native
from tests.qoperator_models import qoperator

pytestmark = requires_native


def _quantize_dynamic(model: onnx.ModelProto) -> onnx.ModelProto:
    from tests.test_dynamic_integer import _quantize_dynamic as quantize

    logging.getLogger().setLevel(logging.WARNING)
    return quantize(model)


def _cast_scale() -> onnx.ModelProto:
    from tests.test_cast_scale import _model

    return _model(TensorProto.UINT8, zero_point=())


# onnxruntime's MatMulNBits GEMV path sums in another order than MatMul: measured <= 4.8e-6 on
# these layers (the order bound, 2(K-1) 2^-24 sum|a w|: published.assert_summed_in_another_order)
NBITS_ATOL = 1e-5
FORMS: dict[str, tuple[Callable[[], onnx.ModelProto], float]] = {  # producer, bound
    # onnxruntime's MatMulNBits kernel sums in an order the CPU's kernels choose: the bound
    # validation states for it (other_kernels; equal on the CPU this was written on)
    "matmul_nbits-quantizer": (lambda: published.quantizer_nbits(64, 16, True, 4), NBITS_ATOL),
    "matmul_nbits-packed-zp-bias": (
        lambda: published.matmul_nbits(zero_points="packed", bias=True),
        NBITS_ATOL,
    ),
    # the integer ops sum in int32, the spec form in float32 (integer_sums; measured 1.8e-7)
    "integer-mlp": (lambda: _quantize_dynamic(producers.mlp(16)), 2e-6),
    "integer-cnn": (lambda: _quantize_dynamic(producers.cnn(13)), 2e-6),
    "qoperator-s8": (lambda: qoperator("s8", True), 0.0),  # s8 x s8: identical unfused
    "cast-scale": (_cast_scale, 0.0),
}
NESTS = {"if": nested_forms.in_if, "loop": nested_forms.in_loop}


def _kinds(model: onnx.ModelProto) -> Counter[tuple[str, str]]:
    return Counter((n.domain, n.op_type) for g in proto_graphs(model.graph) for n in g.node)


def _plain_nodes(graph: onnx.GraphProto) -> list[bytes]:
    """The graph's nodes, byte for byte, but If/Loop (their bodies are compared on their own)
    and Constant (a restored one is named by the factory). An explicit empty domain counts as
    the unset one: onnx-ir drops it on nodes lower does not restore (restored QOperator nodes
    keep it: tests/test_qoperator.py)."""
    found = []
    for node in graph.node:
        if node.op_type in ("If", "Loop", "Constant"):
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        if not copy.domain:
            copy.ClearField("domain")
        found.append(copy.SerializeToString())
    return sorted(found)


def _feeds(model: onnx.ModelProto, cond: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    feeds = {}
    for graph_input in model.graph.input:
        tensor = graph_input.type.tensor_type
        if graph_input.name == "cond":
            feeds["cond"] = np.array(cond)
        else:
            dims = [d.dim_value or 3 for d in tensor.shape.dim]
            dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            feeds[graph_input.name] = rng.standard_normal(dims).astype(dtype)
    return feeds


@pytest.mark.parametrize("weights", nested_forms.WEIGHTS)
@pytest.mark.parametrize("nest", NESTS)
@pytest.mark.parametrize("form", FORMS)
def test_form_in_a_subgraph_converts_runs_and_lowers_back(
    form: str, nest: str, weights: str
) -> None:
    make, bound = FORMS[form]
    flat = make()
    model = NESTS[nest](flat, weights)
    copies = 2 if nest == "if" else 1
    flat_report = quantgraph.convert(flat).report
    result = quantgraph.convert(model)
    report = result.report
    assert report.converted == {op: n * copies for op, n in flat_report.converted.items()}
    assert sorted(s.code for s in report.skipped) == sorted(
        s.code for s in flat_report.skipped for _ in range(copies)
    )
    assert {n.graph for n in report.converted_nodes} == (
        {"then", "else"} if nest == "if" else {"body"}
    )
    left, flat_left = _kinds(result.proto), _kinds(quantgraph.convert(flat).proto)
    for op in flat_report.converted:  # what stays (an int32 bias DequantizeLinear) stays alike
        for domain in ("", published.CONTRIB):
            assert left[(domain, op)] == flat_left[(domain, op)] * copies, op

    session = quantgraph.InferenceSession(result.proto, "native")
    for cond in (True, False):
        feeds = _feeds(model, cond)
        want = ort_session(model).run(None, feeds)
        got = session.run(None, feeds)
        for a, b in zip(want, got, strict=True):
            difference = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
            assert np.max(difference) <= bound, (form, cond, np.max(difference))

    lowered = quantgraph.lower(result.proto)
    assert lowered.report.skipped == []
    back = lowered.proto
    assert _kinds(back) == _kinds(model)
    for got_graph, want_graph in zip(
        proto_graphs(back.graph), proto_graphs(model.graph), strict=True
    ):
        assert _plain_nodes(got_graph) == _plain_nodes(want_graph)
        got_inits = {t.name: t.SerializeToString() for t in got_graph.initializer}
        assert got_inits == {t.name: t.SerializeToString() for t in want_graph.initializer}


@pytest.mark.parametrize("nest", NESTS)
@pytest.mark.parametrize("form", FORMS)
def test_declared_shapes_in_subgraphs_hold(form: str, nest: str) -> None:
    """The value_info that convert and lower write in bodies (onnx-ir writes one for every
    value it knows the type of) never contradicts ONNX's strict shape inference. One with no
    shape field is "shape unknown", which onnx's printer writes ``float[] body_w_d``; a scalar
    is ``float body_s``: not a scalar claim (issue #34, checked on onnx 1.23)."""
    model = NESTS[nest](FORMS[form][0](), "body")
    converted = quantgraph.convert(model).proto
    for proto in (converted, quantgraph.lower(converted).proto):
        onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)
        tensors = {t.name: list(t.dims) for g in proto_graphs(proto.graph) for t in g.initializer}
        for graph in proto_graphs(proto.graph):
            for info in graph.value_info:
                tensor = info.type.tensor_type
                if info.name in tensors and tensor.HasField("shape"):
                    assert [d.dim_value for d in tensor.shape.dim] == tensors[info.name], info


def test_unknown_shape_prints_as_empty_brackets() -> None:
    """What ``float[] body_w_d`` means in onnx's text format: no shape (unknown rank)."""
    graph = onnx.parser.parse_graph("g (float[] a, float b) => (float c) { c = Add(b, b) }")
    unknown, scalar = (i.type.tensor_type for i in graph.input)
    assert not unknown.HasField("shape")
    assert scalar.HasField("shape") and len(scalar.shape.dim) == 0
