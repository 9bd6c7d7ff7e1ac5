"""``onnx.checker.check_model(full_check=True)`` as the last pass of a pipeline.

Unlike onnx-ir's CheckerPass, which serializes the model for the checker and drops the bytes,
this pass keeps the checked serialization's bytes in ``model.meta[CHECKED_BYTES]``: the writer
saves them instead of serializing the model again (~1 s of a 100k-node conversion). Bytes, not
the ModelProto: on a 100k-node model the proto holds ~140 MB where its bytes are 12 MB, and it
is dropped before the checker makes its own copy. It also checks the
initializers' values (CheckerPass leaves out those over 1 KB), which the schemas' scale-value
rule reads. A model whose weights live in external data is checked where it is written instead.
"""

from __future__ import annotations

from typing import Literal

import onnx
import onnx_ir as ir

from ..ir.checker import OpKey, check_bytes, check_proto
from ..ir.domain_fields import write_domain_fields
from .requirements import schemas_registered

CHECKED_BYTES = "quantgraph.checked_bytes"


class FullCheckPass(ir.passes.PassBase):
    """Raises ``onnx.checker.ValidationError`` for a model the full check rejects; ``accepted``
    ops (unknown to onnx, kept from the original: :mod:`quantgraph.ir.checker`) excepted."""

    def __init__(self, accepted: frozenset[OpKey] = frozenset()) -> None:
        super().__init__()
        self.accepted = accepted

    @property
    def in_place(self) -> Literal[True]:
        return True

    @property
    def changes_input(self) -> Literal[False]:
        return False

    def requires(self, model: ir.Model) -> None:
        schemas_registered()  # the checker validates spec ops against their schemas

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        proto = write_domain_fields(model, ir.to_proto(model))
        if self.accepted:  # checked with those nodes set aside in the proto itself
            check_proto(proto, self.accepted)
            data = proto.SerializeToString()
        else:
            data = proto.SerializeToString()
            del proto
            check_bytes(data)
        model.meta[CHECKED_BYTES] = data
        return ir.passes.PassResult(model, modified=False)


def checked_bytes(model: ir.Model) -> bytes | None:
    """The serialization :class:`FullCheckPass` checked, if it ran last on ``model``."""
    found: bytes | None = model.meta.get(CHECKED_BYTES)
    return found


def checked_proto(model: ir.Model) -> onnx.ModelProto | None:
    """:func:`checked_bytes` parsed (a new proto each call)."""
    data = checked_bytes(model)
    return None if data is None else onnx.ModelProto.FromString(data)
