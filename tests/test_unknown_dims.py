"""Unknown dims (symbolic, unnamed, -1) in model inputs and intermediate values, on every backend.

onnxruntime hands a custom op's shape inference an unnamed unknown dim as -1; the native and onednn
libraries once wrote it back as the dim value -1, so the rewritten model failed to load ("Can't
merge shape info") or onnxruntime aborted in Slice's inference (a std::clamp assertion, exit 134).
Each case here must load on every backend and give the original's outputs at ORT_DISABLE_ALL, for
every feed (an empty dim included).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from tests.builders import EVERY_BACKEND, assert_identical, run_ort

Dims = Sequence[int | str | None]

UNKNOWN = {"unnamed": None, "symbolic": "n", "minus_one": -1}


def _info(name: str, elem: int, dims: Dims | None) -> onnx.ValueInfoProto:
    info = helper.make_tensor_value_info(name, elem, None if dims is None else list(dims))
    for dim, value in zip(info.type.tensor_type.shape.dim, dims or (), strict=False):
        if value == -1:  # make_tensor_value_info refuses negative values: as Paddle2ONNX writes
            dim.dim_value = -1
    return info


def _model(
    unknown: int | str | None,
    *,
    zp: np.ndarray,
    value_info: str,
    output: Dims,
    relu: bool,
) -> onnx.ModelProto:
    """x [1, ?] (-> Relu) -> QuantizeLinear -> DequantizeLinear -> Slice(:2 on axis 1) -> y; a
    second output slices the quantized tensor itself."""
    consts = {
        "s": np.array(0.05, np.float32),
        "z": zp,
        "starts": np.array([0], np.int64),
        "ends": np.array([2], np.int64),
        "axes": np.array([1], np.int64),
    }
    source = "r" if relu else "x"
    nodes = [helper.make_node("Relu", ["x"], ["r"])] if relu else []
    nodes += [
        helper.make_node("QuantizeLinear", [source, "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
        helper.make_node("Slice", ["d", "starts", "ends", "axes"], ["y"]),
        helper.make_node("Slice", ["q", "starts", "ends", "axes"], ["yq"]),
    ]
    q_type = helper.np_dtype_to_tensor_dtype(zp.dtype)
    infos: list[onnx.ValueInfoProto] = []
    if value_info == "partial":  # as onnx-neural-compressor writes: some dims unknown
        infos = [_info("q", q_type, [1, None]), _info("d", TensorProto.FLOAT, [None, None])]
        if relu:
            infos.append(_info("r", TensorProto.FLOAT, [1, -1]))
    elif value_info == "symbolic":
        infos = [_info("q", q_type, [1, "m"]), _info("d", TensorProto.FLOAT, ["b", "m"])]
    graph = helper.make_graph(
        nodes,
        "unknown_dims",
        [_info("x", TensorProto.FLOAT, [1, unknown])],
        [_info("y", TensorProto.FLOAT, output), _info("yq", q_type, output)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
        value_info=infos,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


FEEDS = [
    np.random.default_rng(1).normal(size=(1, 7)).astype(np.float32),
    np.random.default_rng(2).normal(size=(1, 1)).astype(np.float32),
    np.zeros((1, 0), np.float32),
]


@pytest.mark.parametrize("backend", EVERY_BACKEND)
@pytest.mark.parametrize("unknown", list(UNKNOWN.values()), ids=list(UNKNOWN))
@pytest.mark.parametrize("value_info", ["none", "partial", "symbolic"])
@pytest.mark.parametrize(
    ("zp", "output", "relu", "static"),
    [
        (np.array(128, np.uint8), [1, None], False, False),
        (np.array(-3, np.int8), [1, None], True, False),  # s8 dst: a type onnxruntime must set
        (np.array(128, np.uint8), [1, 2], True, True),  # a declared known output dim
    ],
    ids=["u8", "s8-relu", "static-declared"],
)
def test_unknown_dims_load_and_agree(
    backend: str,
    unknown: int | str | None,
    value_info: str,
    zp: np.ndarray,
    output: Dims,
    relu: bool,
    static: bool,
) -> None:
    original = _model(unknown, zp=zp, value_info=value_info, output=output, relu=relu)
    converted = quantgraph.convert(original, static=static).model
    session = quantgraph.InferenceSession(converted, backend)
    feeds = FEEDS[:1] if output[1] == 2 else FEEDS  # a declared 2 holds for 2 or more only
    for number, x in enumerate(feeds):
        expected = run_ort(original, {"x": x})
        assert_identical(expected, session.run(None, {"x": x}), f"{backend}, feed {number}")


def test_a_minus_one_dim_never_reaches_onnx_inference() -> None:
    """ONNX's own Slice inference aborts on a declared -1 (onnx 1.23): every place quantgraph
    runs ONNX's shape inference on a model makes such dims unknown first. In a child process,
    since the failure is an abort."""
    code = (
        "import numpy as np, onnx_ir as ir, quantgraph\n"
        "from quantgraph.ir.shape_inference import inferred_values\n"
        "from quantgraph.runtime.support import node_support\n"
        "from quantgraph.validation.debug.intermediate import with_all_outputs\n"
        "from tests.test_unknown_dims import _model\n"
        "m = _model(-1, zp=np.array(128, np.uint8), value_info='partial', output=[1, None],"
        " relu=True)\n"
        "inferred_values(ir.from_proto(m))\n"
        "with_all_outputs(ir.from_proto(m))\n"
        "converted = quantgraph.convert(m).model\n"
        "print(len(node_support(converted, 'native')))\n"
        "quantgraph.lower(converted)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "2"


def test_an_unnamed_dim_never_aborts_the_process() -> None:
    """The abort killed the process: run the historic repro in a child and read its exit code."""
    code = (
        "import numpy as np, quantgraph\n"
        "from tests.test_unknown_dims import _model\n"
        "m = _model(None, zp=np.array(128, np.uint8), value_info='none', output=[1, None],"
        " relu=False)\n"
        "for b in ('native', 'onednn'):\n"
        "    try:\n"
        "        s = quantgraph.InferenceSession(quantgraph.convert(m).model, b)\n"
        "    except quantgraph.errors.QuantgraphError as e:  # not built here\n"
        "        continue\n"
        "    s.run(None, {'x': np.ones((1, 3), np.float32)})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
