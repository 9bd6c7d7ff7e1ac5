"""The product's main jobs as calls: rewrite a QDQ model into the spec ops, and back."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnx_ir as ir

from ._collector import collector_paused
from .errors import ModelError
from .io import AUTO, ModelLike, has_external_data, load_model, save_model
from .passes import QdqToSpecPass, RewriteReport, SpecToQdqPass
from .passes.qdq_to_spec import MAX_OPSET, MIN_OPSET, Progress
from .schemas import register as register_schemas


@dataclass(frozen=True)
class ConvertResult:
    """The rewritten model and what the rewrite did; unpacks as ``model, report``."""

    ir_model: ir.Model
    report: RewriteReport
    checked: bool
    proto: onnx.ModelProto | None = None  # the checked serialization, reused when saving

    @property
    def model(self) -> onnx.ModelProto:
        return self.proto if self.proto is not None else ir.to_proto(self.ir_model)

    def __iter__(self) -> Iterator[object]:
        yield self.model
        yield self.report

    def save(
        self,
        path: str | os.PathLike[str],
        *,
        external_data: str = AUTO,
        force: bool = True,
        protect: tuple[Path, ...] = (),
    ) -> Path:
        """Write atomically; a model not checked yet (external data) is checked on disk."""
        return save_model(
            self.proto if self.proto is not None else self.ir_model,
            path,
            external_data=external_data,
            force=force,
            protect=protect,
            check=not self.checked,
        )


def convert(
    model: ModelLike,
    *,
    static: bool = False,
    contrib: bool = True,
    check: bool = True,
    progress: Progress | None = None,
) -> ConvertResult:
    """Rewrite ``model``'s QuantizeLinear/DequantizeLinear into quantgraph's ops.

    ``static=True`` emits Quantize/Dequantize (attributes ``scales``/``zps``) wherever scale
    and zero point are constants. The input (path, bytes or proto) is never modified. With
    ``check``, the result must pass ``onnx.checker.check_model(full_check=True)`` (for models
    with external data, when it is saved: the checker reads the weights from disk).
    ``contrib=False`` keeps com.microsoft Q/DQ as they are (listed in the report).
    ``progress(done, total)`` is called as Q/DQ nodes are rewritten.
    """
    rewrite = QdqToSpecPass(static=static, contrib=contrib, progress=progress)
    return _apply(rewrite, model, check, check_opset=True)


def lower(model: ModelLike, *, check: bool = True) -> ConvertResult:
    """Rewrite quantgraph's ops back into standard QuantizeLinear/DequantizeLinear."""
    return _apply(SpecToQdqPass(), model, check)


def _check_opset(graph: ir.Model, source: ModelLike) -> None:
    version = graph.opset_imports.get("", graph.opset_imports.get("ai.onnx"))
    if version is not None and not MIN_OPSET <= version <= MAX_OPSET:
        name = f"{source}: " if isinstance(source, (str, os.PathLike)) else ""
        raise ModelError(
            f"{name}opset {version} is not supported: quantgraph converts models of opset "
            f"{MIN_OPSET} to {MAX_OPSET} (upgrade with onnx.version_converter)"
        )


def _apply(
    rewrite: ir.passes.InPlacePass, model: ModelLike, check: bool, check_opset: bool = False
) -> ConvertResult:
    with collector_paused():
        return _apply_unpaused(rewrite, model, check, check_opset)


def _apply_unpaused(
    rewrite: ir.passes.InPlacePass, model: ModelLike, check: bool, check_opset: bool
) -> ConvertResult:
    register_schemas()
    # Work on a private copy: an ir.Model argument is the caller's object.
    graph = load_model(ir.to_proto(model) if isinstance(model, ir.Model) else model)
    if check_opset:
        _check_opset(graph, model)
    result = rewrite(graph)
    report = getattr(result, "report", None) or RewriteReport()
    checked, proto = not check, None
    if check and not has_external_data(result.model):
        proto = ir.to_proto(result.model)
        try:
            onnx.checker.check_model(proto, full_check=True)
        except onnx.checker.ValidationError as error:
            name = f"{model}: " if isinstance(model, (str, os.PathLike)) else ""
            first = str(error).strip().splitlines()[0] if str(error).strip() else "invalid"
            message = f"{name}the result fails onnx.checker (full_check): {first}"
            raise ModelError(message) from error
        checked = True
    return ConvertResult(result.model, report, checked, proto)
