"""DeclaredDstPass and the seed's dst rule: "the target quantized data type is specified via the
data type of output logical tensor" when neither output_dtype nor s8/u8 zps decide it."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto

from quantgraph.passes import DeclaredDstPass
from quantgraph.spec import SpecError
from tests.builders import EVERY_BACKEND, attributes, run_quantgraph, spec_op_model

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is 3.11+; the project supports 3.10

F, S8, U8 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8
X = np.array([-1, 0, 1, 2], np.float32).reshape(1, 2, 2)


def _apply(model: onnx.ModelProto) -> tuple[onnx.ModelProto, bool]:
    loaded = ir.from_proto(model)
    modified = DeclaredDstPass()(loaded).modified
    return ir.to_proto(loaded), modified


class _Options(TypedDict, total=False):
    """What the tests here vary of spec_op_model's DynamicQuantize."""

    zps: np.ndarray
    float_output: bool
    output_dtype: int


def _quantize(dst_type: int | None, **kwargs: Unpack[_Options]) -> onnx.ModelProto:
    return spec_op_model(
        "DynamicQuantize", (F, [1, 2, 2]), np.array([0.1], np.float32), dst_type=dst_type, **kwargs
    )


def test_declared_s8_becomes_output_dtype() -> None:
    model, modified = _apply(_quantize(S8))
    assert modified
    assert attributes(model.graph.node[0])["output_dtype"] == S8


def test_declared_in_value_info_counts_too() -> None:
    model, modified = _apply(_quantize(S8, float_output=True))
    assert modified
    assert attributes(model.graph.node[0])["output_dtype"] == S8


@pytest.mark.parametrize(
    ("dst_type", "kwargs"),
    [
        (U8, {}),  # what the default says already
        (None, {}),  # nothing declared: u8
        (S8, {"output_dtype": U8}),  # output_dtype decides (and the rules report the clash)
        (S8, {"zps": np.array([0], np.uint8)}),  # zps decide (and the rules report the clash)
    ],
)
def test_nothing_to_pin(dst_type: int | None, kwargs: _Options) -> None:
    model = _quantize(dst_type, **kwargs)
    after, modified = _apply(model)
    assert not modified
    assert after.graph.node[0] == model.graph.node[0]


def test_dequantize_ops_are_left_alone() -> None:
    model = spec_op_model("DynamicDequantize", (U8, [4]), np.array([0.1], np.float32), dst_type=F)
    assert not _apply(model)[1]


def test_a_declared_type_the_spec_rejects_is_the_dst_type_rule() -> None:
    model, modified = _apply(_quantize(TensorProto.INT16))
    assert modified
    from quantgraph.passes import CheckSpecRulesPass

    with pytest.raises(SpecError, match=r"dst-type|output_dtype"):
        CheckSpecRulesPass()(ir.from_proto(model))


# oneDNN's hand-checkable cases (its unit tests, shape {1,2,2}) with an s8 dst and no zps.
@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_static_quantize_s8_dst_without_zps(backend: str) -> None:
    model = spec_op_model(
        "Quantize", (F, [1, 2, 2]), [0.1, 0.2], dst_type=S8, qtype="per_channel", axis=1
    )
    (result,) = run_quantgraph(model, backend, {"src": X})
    assert result.dtype == np.int8
    np.testing.assert_array_equal(result.ravel(), [-10, 0, 5, 10])


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_dynamic_quantize_s8_dst_without_zps(backend: str) -> None:
    (result,) = run_quantgraph(_quantize(S8), backend, {"src": X})
    assert result.dtype == np.int8
    np.testing.assert_array_equal(result.ravel(), [-10, 0, 10, 20])


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_negative_values_saturate_at_s8_not_u8(backend: str) -> None:
    src = np.array([-1000, -12.8, -12.9, 12.7], np.float32)
    model = spec_op_model("DynamicQuantize", (F, [4]), np.array([0.1], np.float32), dst_type=S8)
    (result,) = run_quantgraph(model, backend, {"src": src})
    np.testing.assert_array_equal(result, [-128, -128, -128, 127])
