"""The one-node models the fuzzer runs: a dynamic op over symbolic dims (one session serves
every call of a :class:`~tools.fuzz.case.Signature`) and a static op, whose scales and zps are
attributes (one model per call)."""

from __future__ import annotations

import onnx

from quantgraph.spec import DOMAIN, dtypes
from quantgraph.testing import Input, Output, one_op_model, typed_list

from .case import NODE, Case, Signature


def dynamic_model(sig: Signature) -> onnx.ModelProto:
    """A one-node model of a dynamic op over symbolic dims (one session serves every shape)."""
    dims = [f"d{i}" for i in range(sig.rank)]
    grouped = sig.group_shape is not None  # per_group: scales and zps of src's rank
    scale_dims = [f"g{i}" for i in range(sig.rank)] if grouped else ["c"]
    inputs: dict[str, Input] = {
        "src": (dtypes.BY_NAME[sig.src].onnx, dims),
        "scales": (dtypes.BY_NAME[sig.scales].onnx, scale_dims),
    }
    if sig.zps:
        inputs["zps"] = (dtypes.BY_NAME[sig.zps].onnx, scale_dims if grouped else ["z"])
    outputs: dict[str, Output] = {"dst": (dtypes.BY_NAME[sig.dst].onnx, dims)}
    return one_op_model(
        sig.op, inputs, outputs, domain=DOMAIN, name=NODE, graph_name="fuzz", **sig.attributes()
    )


def static_model(case: Case) -> onnx.ModelProto:
    """A one-node model of a static op: scales and zps are the node's attributes."""
    sig = case.sig
    dims = [f"d{i}" for i in range(sig.rank)]
    lists = {"scales": typed_list([float(v) for v in case.scales], floats=True)}
    if case.zps is not None:
        lists["zps"] = typed_list([int(v) for v in case.zps], floats=False)
    return one_op_model(
        sig.op,
        {"src": (dtypes.BY_NAME[sig.src].onnx, dims)},
        {"dst": (dtypes.BY_NAME[sig.dst].onnx, dims)},
        domain=DOMAIN,
        name=NODE,
        graph_name="fuzz",
        **sig.attributes(),
        **lists,
    )
