"""Helpers to build, run and compare small models, shared by quantgraph's tests, tools, benchmarks
and capability probing (as ``onnx_ir.testing`` ships onnx-ir's own).

* Models: :func:`make_model` for any graph, :func:`one_op_model` for a model of one node whose
  inputs are graph inputs (``(element type, shape)``), constants (arrays or TensorProtos, which
  become initializers) or absent optional inputs (``None``).
* Sessions: :func:`quiet_session_options` that log nothing (refusals are results, not log lines) and
  :func:`ort_session`, onnxruntime's own CPU kernels at ORT_DISABLE_ALL (the oracle).
* Tensors: :func:`to_ort_value` / :func:`from_ort_value` for the types onnxruntime's numpy API
  lacks (float8, bfloat16, 4-bit), :func:`pack4` / :func:`unpack4` for 4-bit storage.
* :func:`assert_bit_identical`: outputs equal by :mod:`quantgraph.reference.compare`'s rule,
  the one every report uses.

onnxruntime is imported when a session or an OrtValue is made, not with this module.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper

from .reference.compare import compare, mismatch_mask
from .spec import DOMAIN, OPSET_VERSION, dtypes

if TYPE_CHECKING:
    import onnxruntime as ort

OPSET = 21  # the ONNX opset of the models built here unless told otherwise
IR_VERSION = 10

Shape = Sequence[int | str | None] | None
# A node input: a graph input ``(element type, shape)``, a constant, None (absent: an empty
# input before a present one, left out at the end) or "" (an empty input, kept at the end too).
Input = tuple[int, Shape] | np.ndarray | TensorProto | Literal[""] | None
# A node output: declared ``(element type, shape)``, or None (named only, its type inferred).
Output = tuple[int, Shape] | None


# -- models ----------------------------------------------------------------------------------


def tensor_info(name: str, elem: int, shape: Shape) -> onnx.ValueInfoProto:
    """A tensor's value info; ``shape`` None leaves the rank unknown."""
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[TensorProto] = (),
    *,
    opset: int = OPSET,
    domains: Mapping[str, int] | None = None,
    functions: Sequence[onnx.FunctionProto] = (),
    value_info: Sequence[onnx.ValueInfoProto] = (),
    graph_name: str = "g",
    ir_version: int = IR_VERSION,
    check: bool = True,
) -> onnx.ModelProto:
    """A model of one graph; ``domains`` are opset imports besides ONNX's own.

    ``check``: the model must pass onnx's full check (a builder of valid models); pass False for
    a model that is broken on purpose or holds ops whose schemas are not registered.
    """
    graph = helper.make_graph(
        list(nodes),
        graph_name,
        list(inputs),
        list(outputs),
        initializer=list(initializers),
        value_info=list(value_info),
    )
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(domain, version) for domain, version in (domains or {}).items()]
    model = helper.make_model(
        graph, opset_imports=imports, functions=list(functions), ir_version=ir_version
    )
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def constant(name: str, value: np.ndarray | TensorProto) -> TensorProto:
    """An initializer named ``name``: an array (ml_dtypes' float8 and 4-bit included) or a copy
    of a TensorProto."""
    if isinstance(value, TensorProto):
        tensor = TensorProto()
        tensor.CopyFrom(value)
        tensor.name = name
        return tensor
    array = np.asarray(value)
    found = dtypes.from_numpy(array.dtype)
    if found is not None and found.bits == 4:  # onnx's from_array wants them packed
        return helper.make_tensor(name, found.onnx, list(array.shape), pack4(array).tobytes(), True)
    return onnx.numpy_helper.from_array(array, name)


def one_op_model(
    op: str,
    inputs: Mapping[str, Input],
    outputs: Mapping[str, Output],
    *,
    domain: str = "",
    name: str = "node",
    opset: int = OPSET,
    float_output: str | None = None,
    graph_name: str = "g",
    ir_version: int = IR_VERSION,
    check: bool = False,
    **attributes: Any,
) -> onnx.ModelProto:
    """A model of one ``op`` node named ``name``: ``inputs`` and ``outputs`` in the node's order
    (see the module doc; trailing absent inputs are dropped). ``domain`` DOMAIN imports the spec's
    opset, another non-empty domain version 1.

    Attributes are given as onnx.helper.make_node takes them; an AttributeProto is added as it
    is (an empty list needs its type said). ``float_output``: the graph's output is this name,
    the node's first output cast to f32 (onnxruntime hands no float8 to numpy; the cast is
    exact), of the node output's declared shape, else of the first input's. Not checked unless
    ``check``: tests of the rules build broken nodes on purpose.
    """
    graph_inputs: list[onnx.ValueInfoProto] = []
    initializers: list[TensorProto] = []
    names: list[str | None] = []
    shapes: list[Shape] = []
    for key, given in inputs.items():
        if given is None or isinstance(given, str):
            if given:
                raise ValueError(f"input {key}: a string must be '' (an empty input)")
            names.append(given)
        elif isinstance(given, tuple):
            graph_inputs.append(tensor_info(key, given[0], given[1]))
            names.append(key)
            shapes.append(given[1])
        else:
            initializers.append(constant(key, given))
            names.append(key)
            shapes.append(list(given.dims) if isinstance(given, TensorProto) else given.shape)
    while names and names[-1] is None:
        names.pop()
    typed = {k: v for k, v in attributes.items() if isinstance(v, onnx.AttributeProto)}
    plain = {k: v for k, v in attributes.items() if k not in typed}
    node = helper.make_node(
        op, [n or "" for n in names], list(outputs), name=name, domain=domain or None, **plain
    )
    for key, attribute in typed.items():
        attribute = _copy(attribute)
        attribute.name = key
        node.attribute.append(attribute)
    nodes = [node]
    declared = [
        onnx.ValueInfoProto(name=key) if out is None else tensor_info(key, out[0], out[1])
        for key, out in outputs.items()
    ]
    value_info: list[onnx.ValueInfoProto] = []
    if float_output is not None:
        first = next(iter(outputs))
        nodes.append(helper.make_node("Cast", [first], [float_output], to=TensorProto.FLOAT))
        value_info = [v for v in declared[:1] if v.type.HasField("tensor_type")]
        declared_first = outputs[first]
        # Declared by the node's output, else the first input's (the spec ops keep src's shape).
        shape = declared_first[1] if declared_first else (shapes[0] if shapes else None)
        declared = [tensor_info(float_output, TensorProto.FLOAT, shape), *declared[1:]]
    domains = {} if not domain else {domain: OPSET_VERSION if domain == DOMAIN else 1}
    return make_model(
        nodes,
        graph_inputs,
        declared,
        initializers,
        opset=opset,
        domains=domains,
        value_info=value_info,
        graph_name=graph_name,
        ir_version=ir_version,
        check=check,
    )


def _copy(attribute: onnx.AttributeProto) -> onnx.AttributeProto:
    copy = onnx.AttributeProto()
    copy.CopyFrom(attribute)
    return copy


def typed_list(values: Sequence[float] | Sequence[int], floats: bool) -> onnx.AttributeProto:
    """A list attribute of a stated type (for :func:`one_op_model`): an empty list, or ints
    that must be FLOATS, has no type onnx can infer."""
    kind = onnx.AttributeProto.FLOATS if floats else onnx.AttributeProto.INTS
    cast = float if floats else int
    return helper.make_attribute("", [cast(v) for v in values], attr_type=kind)


# -- sessions --------------------------------------------------------------------------------


def quiet_session_options(
    *,
    threads: int = 0,
    inter_op_threads: int = 0,
    spinning: bool = True,
    optimize: bool = False,
) -> ort.SessionOptions:
    """onnxruntime SessionOptions that log nothing: a refusal is asserted on or reported, never
    printed. ``optimize`` False: ORT_DISABLE_ALL (onnxruntime's kernels as they are).
    ``spinning`` False: idle pool threads sleep (many sessions alive at once, or a machine with
    few cores, must not lose time to workers spinning after a run)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = inter_op_threads
    options.log_severity_level = 4
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def ort_session(
    model: onnx.ModelProto | bytes | str | os.PathLike[str],
    options: ort.SessionOptions | None = None,
) -> ort.InferenceSession:
    """onnxruntime's own CPU kernels on ``model`` (a proto, its bytes or a file), by default
    unoptimized and quiet (:func:`quiet_session_options`)."""
    import onnxruntime as ort

    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    if isinstance(data, os.PathLike):
        data = os.fspath(data)
    return ort.InferenceSession(
        data, options or quiet_session_options(), providers=["CPUExecutionProvider"]
    )


# -- tensors ---------------------------------------------------------------------------------


def pack4(values: np.ndarray) -> np.ndarray:
    """4-bit values (ml_dtypes int4/uint4, or any integers in range) as ONNX and onnxruntime
    store them: two a byte, the first in the low nibble; an odd count leaves the last high
    nibble zero."""
    nibbles = (np.asarray(values).reshape(-1).astype(np.int64) & 0xF).astype(np.uint8)
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    packed: np.ndarray = np.ascontiguousarray(nibbles[0::2] | (nibbles[1::2] << 4), np.uint8)
    return packed


def unpack4(packed: np.ndarray, shape: Sequence[int], signed: bool) -> np.ndarray:
    """The inverse of :func:`pack4`: an ml_dtypes int4 (``signed``) or uint4 array of ``shape``."""
    raw = np.asarray(packed, np.uint8).reshape(-1)
    nibbles = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(-1)
    count = int(np.prod(shape, dtype=np.int64))
    wide = nibbles[:count].astype(np.int8)
    if signed:
        wide = np.where(wide > 7, wide - 16, wide).astype(np.int8)
    found = dtypes.S4 if signed else dtypes.U4
    result: np.ndarray = wide.astype(found.numpy).reshape(tuple(shape))
    return result


def to_ort_value(array: np.ndarray) -> ort.OrtValue:
    """An OrtValue of ``array``'s type and shape (0-d kept 0-d), float8, bfloat16 and 4-bit
    included (onnxruntime's numpy API takes none of them)."""
    import onnxruntime as ort

    array = np.array(array, copy=True, order="C")  # (ascontiguousarray makes 0-d 1-d)
    found = dtypes.from_numpy(array.dtype)
    if found is not None and found.bits == 4:
        value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), found.onnx)
        packed = pack4(array)
        if packed.size:
            ctypes.memmove(value.data_ptr(), packed.ctypes.data, packed.size)
        return value
    if found is not None and found.from_ml_dtypes:  # float8, bfloat16: the raw bits
        width = np.uint8 if found.bits == 8 else np.uint16
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(width), found.onnx)
    onnx_type = found.onnx if found else int(helper.np_dtype_to_tensor_dtype(array.dtype))
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array, onnx_type)


_BY_DATA_TYPE = {
    "tensor(float)": dtypes.F32,
    "tensor(uint8)": dtypes.U8,
    "tensor(int8)": dtypes.S8,
    "tensor(int32)": dtypes.S32,
    "tensor(float8e4m3fn)": dtypes.F8_E4M3,
    "tensor(float8e5m2)": dtypes.F8_E5M2,
    "tensor(float16)": dtypes.F16,
    "tensor(bfloat16)": dtypes.BF16,
    "tensor(int4)": dtypes.S4,
    "tensor(uint4)": dtypes.U4,
}


def from_ort_value(value: ort.OrtValue) -> np.ndarray:
    """A copy of an OrtValue's data as numpy (read as raw bytes: onnxruntime's Python API has no
    numpy type for float8_e5m2 and packs 4-bit types)."""
    found = _BY_DATA_TYPE[value.data_type()]
    shape = tuple(value.shape())
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.zeros(shape, found.numpy)
    size = (count + 1) // 2 if found.bits == 4 else count * found.numpy.itemsize
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(value.data_ptr())).copy()
    if found.bits == 4:
        return unpack4(raw, shape, signed=found == dtypes.S4)
    return raw.view(found.numpy).reshape(shape)


# -- comparing -------------------------------------------------------------------------------


def assert_bit_identical(
    expected: Sequence[np.ndarray] | np.ndarray,
    actual: Sequence[np.ndarray] | np.ndarray,
    what: str = "",
) -> None:
    """Raise AssertionError unless every output has the same type, shape and values by
    :mod:`quantgraph.reference.compare`'s rule: bit patterns for floats (``-0`` is not
    ``+0``), any two NaNs equal. The message names the output, the count and the first
    differing elements."""
    if isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
        expected, actual = [np.asarray(expected)], [np.asarray(actual)]
    label = f"{what}: " if what else ""
    if len(expected) != len(actual):
        raise AssertionError(f"{label}{len(actual)} outputs, expected {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        want, got = np.asarray(want), np.asarray(got)
        if want.dtype != got.dtype:
            raise AssertionError(f"{label}output {index} dtype {got.dtype}, expected {want.dtype}")
        if want.shape != got.shape:
            raise AssertionError(f"{label}output {index} shape {got.shape}, expected {want.shape}")
        result = compare(f"output {index}", want, got)
        if result.mismatches:
            flat_w, flat_g = want.reshape(-1), got.reshape(-1)
            bad = np.flatnonzero(mismatch_mask(want, got))[:8].tolist()
            raise AssertionError(
                f"{label}output {index} differs in {result.mismatches} of {want.size} elements, "
                f"at {bad}: expected {flat_w[bad].astype(np.float64).tolist()}, "
                f"got {flat_g[bad].astype(np.float64).tolist()}"
            )
