"""quantgraph.testing, the helpers tests, tools and benches share: 4-bit packing against onnx's
own packing, OrtValues round-trip for every spec type, one-op models run in onnxruntime, and the
bit-identical assertion follows quantgraph.reference.compare's rule."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from quantgraph import testing
from quantgraph.spec import dtypes


@pytest.mark.parametrize("dtype", [dtypes.S4, dtypes.U4], ids=str)
@pytest.mark.parametrize("count", [0, 1, 2, 7])
def test_pack4_is_onnx_packing_and_unpack4_inverts_it(dtype: dtypes.DType, count: int) -> None:
    low, high = dtype.int_range
    values = np.arange(count) % (high - low + 1) + low
    array = values.astype(dtype.numpy)
    packed = testing.pack4(array)
    assert packed.tobytes() == numpy_helper.from_array(array).raw_data  # onnx's own packing
    back = testing.unpack4(packed, array.shape, signed=dtype == dtypes.S4)
    assert back.dtype == array.dtype and back.tolist() == array.tolist()


@pytest.mark.parametrize("dtype", dtypes.ALL, ids=str)
def test_ort_values_round_trip_every_spec_type(dtype: dtypes.DType) -> None:
    rng = np.random.default_rng(0)
    if dtype.is_integer:
        low, high = dtype.int_range
        array = rng.integers(low, high + 1, (2, 3)).astype(dtype.numpy)
    else:
        array = rng.standard_normal((2, 3)).astype(dtype.numpy)
    value = testing.to_ort_value(array)
    assert value.shape() == [2, 3]
    testing.assert_bit_identical(array, testing.from_ort_value(value))
    scalar = testing.to_ort_value(array[0, 0].reshape(()))
    assert scalar.shape() == []  # 0-d stays 0-d


def test_one_op_model_runs_in_onnxruntime_and_drops_trailing_absent_inputs() -> None:
    model = testing.one_op_model(
        "DequantizeLinear",
        {"x": (TensorProto.INT4, [5]), "scale": np.array(0.5, np.float32), "zero_point": None},
        {"y": (TensorProto.FLOAT, [5])},
        check=True,
    )
    assert list(model.graph.node[0].input) == ["x", "scale"]
    x = np.array([-8, -1, 0, 3, 7], dtypes.S4.numpy)
    session = testing.ort_session(model)
    (y,) = session.run_with_ort_values(None, {"x": testing.to_ort_value(x)})
    assert testing.from_ort_value(y).tolist() == [-4.0, -0.5, 0.0, 1.5, 3.5]


def test_one_op_model_keeps_an_explicit_empty_input_and_casts_float_outputs() -> None:
    model = testing.one_op_model(
        "QuantizeLinear",
        {"x": (TensorProto.FLOAT, [2]), "scale": np.array(1.0, np.float32), "zp": ""},
        {"y": (TensorProto.FLOAT8E4M3FN, [2])},
        float_output="y_float",
        opset=21,
        output_dtype=TensorProto.FLOAT8E4M3FN,
    )
    assert list(model.graph.node[0].input) == ["x", "scale", ""]
    assert [o.name for o in model.graph.output] == ["y_float"]
    onnx.checker.check_model(model, full_check=True)
    (y,) = testing.ort_session(model).run(None, {"x": np.array([1.0, 500.0], np.float32)})
    assert y.tolist() == [1.0, 448.0]  # float8 e4m3fn saturates at 448


def test_assert_bit_identical_follows_the_compare_rule() -> None:
    nan = np.array([0x7FC00000], np.uint32).view(np.float32)
    other_nan = np.array([0xFFC00001], np.uint32).view(np.float32)
    testing.assert_bit_identical([nan], [other_nan])  # any two NaNs are equal
    with pytest.raises(AssertionError, match=r"output 0 differs in 1 of 1 elements, at \[0\]"):
        testing.assert_bit_identical(np.array([0.0], np.float32), np.array([-0.0], np.float32))
    with pytest.raises(AssertionError, match="dtype float64, expected float32"):
        testing.assert_bit_identical(np.array([1.0], np.float32), np.array([1.0], np.float64))
    with pytest.raises(AssertionError, match="shape"):
        testing.assert_bit_identical(np.zeros(2, np.uint8), np.zeros(3, np.uint8))


def test_quiet_session_options_log_nothing() -> None:
    options = testing.quiet_session_options(threads=2, spinning=False)
    assert options.log_severity_level == 4
    assert options.intra_op_num_threads == 2
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
