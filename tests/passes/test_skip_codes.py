"""What the rewrite passes declare: every skip reason code (SKIP_CODES) for a node that breaks
its rule, with the node itself and today's sentence; and the requirements (requires/ensures) a
pass checks before and after it runs, with the words users read."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import quantgraph
from quantgraph.errors import ModelError
from quantgraph.ir.opsets import opset_problem
from quantgraph.passes import QdqToSpecPass, RewriteReport, SkippedNode, SpecToQdqPass, pipelines
from quantgraph.passes.report import SKIP_CODES, Skip
from quantgraph.testing import one_op_model
from tests.builders import dequantize_linear_model, quantize_linear_model, spec_op_model
from tests.passes import published_skips
from tests.passes.qdq_models import dq_only

F, U8, S8 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8
E4M3 = TensorProto.FLOAT8E4M3FN
HALF = np.array(0.5, np.float32)  # a 0-d scale initializer


def _zp(elem: int, values: list[int], shape: list[int] | None = None) -> onnx.TensorProto:
    return helper.make_tensor("z", elem, [] if shape is None else shape, values)


def _dql(outputs: list[str], opset: int = 21) -> onnx.ModelProto:
    node = helper.make_node("DynamicQuantizeLinear", ["x"], outputs, name="dql")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [4])],
        [helper.make_tensor_value_info(o, F if o == "s" else U8, None) for o in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


# code -> (job, model): "convert" runs quantgraph.convert, "convert-no-contrib" with
# contrib=False, "lower" quantgraph.lower(allow_partial=True); the first node is skipped.
Job = tuple[str, Callable[[], onnx.ModelProto]]
CASES: dict[str, Job] = {
    "act-order": ("convert", published_skips.act_order),
    "float-zero-point": ("convert", published_skips.float_zero_point),
    "packed-layout": ("convert", published_skips.packed_layout),
    "runtime-weight": ("convert", published_skips.runtime_weight),
    "scale-chain": ("convert", published_skips.scale_chain),
    "channels-last": ("convert", published_skips.channels_last),
    "gemm-scaling": ("convert", published_skips.gemm_scaling),
    "gather-axis": ("convert", published_skips.gather_axis),
    "contrib-off": (
        "convert-no-contrib",
        lambda: quantize_linear_model((F, [2]), HALF, _zp(U8, [0]), domain="com.microsoft"),
    ),
    "opset": ("convert", lambda: _dql(["y", "s", "z"], opset=10)),
    "unknown-attribute": (  # ONNX's own nodes with attributes of later opsets are errors
        "convert",
        lambda: dequantize_linear_model(
            (S8, [2]), HALF, _zp(S8, [0]), domain="com.microsoft", check=False, colour=1
        ),
    ),
    "blocked-quantize": (
        "convert",
        lambda: quantize_linear_model(
            (F, [4, 6]),
            np.full((2, 6), 0.5, np.float32),
            _zp(U8, [0] * 12, [2, 6]),
            axis=0,
            block_size=2,
        ),
    ),
    "precision": (
        "convert",
        lambda: quantize_linear_model(
            (F, [2]), HALF, _zp(U8, [0]), opset=25, check=False, precision=TensorProto.FLOAT16
        ),
    ),
    "missing-input": (
        "convert",
        lambda: one_op_model("DequantizeLinear", {"x": (S8, [2])}, {"y": (F, [2])}, name="dq0"),
    ),
    "input-type": (
        "convert",
        lambda: quantize_linear_model((TensorProto.INT32, [2]), HALF, _zp(U8, [0]), opset=13),
    ),
    "scale-type": (
        "convert",
        lambda: quantize_linear_model(
            (TensorProto.FLOAT16, [4, 6]), np.array(0.5, np.float16), _zp(U8, [0])
        ),
    ),
    "output-dtype": (
        "convert",
        lambda: dequantize_linear_model(
            (S8, [2]),
            HALF,
            _zp(S8, [0]),
            y_type=TensorProto.FLOAT16,
            opset=23,
            check=False,
            output_dtype=TensorProto.FLOAT16,
        ),
    ),
    "quantized-type": ("convert", lambda: dq_only(TensorProto.INT32, zero_point=False)),
    "float8-saturate": (
        "convert",
        lambda: quantize_linear_model((F, [2]), HALF, _zp(E4M3, [0]), saturate=0),
    ),
    "float8-zero-point": (
        "convert",
        lambda: dequantize_linear_model((E4M3, [2]), HALF, (E4M3, [])),
    ),
    "float8-runtime-scale": (
        "convert",
        lambda: dequantize_linear_model((E4M3, [2]), (F, [])),
    ),
    "unknown-shape": (
        "convert",
        lambda: dequantize_linear_model((S8, [2]), (F, None), check=False),
    ),
    "scale-rank": (
        "convert",
        lambda: dequantize_linear_model(
            (S8, [2, 2]), np.full((1, 1), 0.5, np.float32), check=False
        ),
    ),
    "zero-point-shape": (
        "convert",
        lambda: dequantize_linear_model(
            (S8, [2, 3]), np.full(3, 0.5, np.float32), _zp(S8, [0, 0], [2]), check=False, axis=1
        ),
    ),
    "blocks": (
        "convert",
        lambda: dequantize_linear_model(
            (S8, [4, 6]),
            np.full((2, 6), 0.5, np.float32),
            _zp(S8, [0] * 12, [2, 6]),
            axis=0,
            block_size=3,
        ),
    ),
    "scale-value": ("convert", lambda: quantize_linear_model((F, [2]), np.array(0.0, np.float32))),
    "zero-point-range": (
        "lower",
        lambda: spec_op_model("Dequantize", (U8, [2]), scales=[0.5], zps=[300], dst_type=F),
    ),
    "runtime-zero-point": (
        "lower",
        lambda: spec_op_model(
            "DynamicDequantize",
            (U8, [2]),
            (F, [1]),
            (TensorProto.INT32, [1]),
            dst_type=F,
            qtype="per_channel",
            axis=0,
        ),
    ),
    "node-arity": ("convert", lambda: _dql(["y", "s"])),
    "unknown-op": ("lower", lambda: spec_op_model("Transmogrify", (U8, [2]), dst_type=F)),
}


def _skipped(job: str, model: onnx.ModelProto) -> list[SkippedNode]:
    if job == "lower":
        return quantgraph.lower(model, check=False, allow_partial=True).report.skipped
    contrib = job != "convert-no-contrib"
    return quantgraph.convert(model, contrib=contrib, check=False).report.skipped


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_skip_code_is_given_for_its_case(code: str) -> None:
    job, build = CASES[code]
    model = build()
    skipped = _skipped(job, model)
    assert [s.code for s in skipped] == [code], [(s.code, s.reason) for s in skipped]
    (found,) = skipped
    node = model.graph.node[0]
    assert (found.node, found.op_type) == (node.name, node.op_type)
    assert isinstance(found.source, ir.Node) and found.source.name == node.name  # the node
    assert found.reason and found.to_dict()["code"] == code


def test_every_code_has_a_case_and_a_meaning() -> None:
    assert set(CASES) == set(SKIP_CODES)
    assert all(SKIP_CODES.values())


def test_an_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown skip code 'nope'"):
        Skip("nope", "a reason")


def test_the_sentence_users_read_is_unchanged() -> None:
    """The report's reason is today's sentence; the code sits beside it."""
    model = dq_only(TensorProto.INT32, zero_point=False)
    (skipped,) = quantgraph.convert(model).report.skipped
    assert skipped.reason == "int32 input (a bias): the spec dequantizes 8-bit, 4-bit and f8 only"
    assert skipped.to_dict() == {
        "node": "dq0",
        "op_type": "DequantizeLinear",
        "reason": skipped.reason,
        "graph": "",
        "code": "quantized-type",
    }


# -- requires / ensures ------------------------------------------------------------------------


def _at_opset(version: int) -> ir.Model:
    model = quantize_linear_model((F, [2]), HALF, _zp(U8, [3]), check=False)
    model.opset_import[0].version = version
    return ir.from_proto(model)


@pytest.mark.parametrize("version", [9, 26])
@pytest.mark.parametrize("make", [QdqToSpecPass, SpecToQdqPass], ids=["qdq_to_spec", "spec_to_qdq"])
def test_a_pass_requires_a_supported_opset_in_the_words_users_read(
    make: Callable[[], ir.passes.PassBase], version: int
) -> None:
    manager = ir.passes.PassManager([make()])
    with pytest.raises(ModelError) as raised:
        pipelines.run(manager, _at_opset(version))
    assert str(raised.value) == opset_problem(version)


def test_convert_and_lower_refuse_through_the_passes_requirement(tmp_path: object) -> None:
    """convert and lower no longer check the opset themselves: the passes' requires does,
    and the message is the same, the file named first."""
    model = ir.to_proto(_at_opset(26))
    path = f"{tmp_path}/m.onnx"
    onnx.save(model, path)
    for job in (quantgraph.convert, quantgraph.lower):
        with pytest.raises(ModelError) as raised:
            job(path)
        assert str(raised.value) == f"{path}: {opset_problem(26)}"


def test_the_rewrite_requires_the_schemas_it_asks_inference_about() -> None:
    from onnx import defs

    from quantgraph.spec import DOMAIN, OPSET_VERSION

    QdqToSpecPass().requires(_at_opset(21))
    assert defs.has("DynamicQuantize", OPSET_VERSION, DOMAIN)


def test_qdq_to_spec_ensures_the_domain_is_imported() -> None:
    class Forgetful(QdqToSpecPass):
        def finish(self, model: ir.Model, report: RewriteReport) -> None:
            pass  # converts, but never imports com.quantgraph

    with pytest.raises(
        ModelError, match=r"the model holds com\.quantgraph ops but does not import"
    ):
        pipelines.run(ir.passes.PassManager([Forgetful()]), _at_opset(21))
