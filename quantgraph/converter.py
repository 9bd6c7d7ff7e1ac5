"""The product's main jobs as calls: rewrite a QDQ model into the spec ops, and back."""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnx_ir as ir

from .errors import ModelError
from .ir.collector import collector_paused
from .ir.domain_fields import write_domain_fields
from .ir.model_files import (
    AUTO,
    ModelLike,
    copy_model,
    has_external_data,
    load_model,
    original_model,
    save_model,
    source_files,
)
from .ir.walk import all_graphs, is_standard, spec_op
from .passes import RewriteReport, pipelines
from .passes.float_model import refuse_unquantized
from .passes.full_check import checked_proto
from .passes.keep_float import keep_float as float_kept
from .passes.node_rewrite import Progress


@dataclass(frozen=True)
class RewriteResult:
    """The rewritten model and what the rewrite did (:func:`convert` or :func:`lower`); unpacks
    as ``model, report``.

    ``checked``: the model passed onnx's full check in memory (a model with external data is
    checked when it is saved, where the checker can read its weights). ``sources``: the files
    the input was read from (a writer must never touch them).
    """

    model: ir.Model
    report: RewriteReport
    checked: bool
    sources: tuple[Path, ...] = ()

    @functools.cached_property
    def proto(self) -> onnx.ModelProto:
        """The model serialized, once: the checked serialization where the check ran (saving
        and sessions reuse it). Changes made to ``model`` after conversion are not in it."""
        return checked_proto(self.model) or write_domain_fields(self.model, ir.to_proto(self.model))

    def original(self) -> ir.Model:
        """The input model as it was read, for comparisons (no file is read again)."""
        found = original_model(self.model)
        assert found is not None  # convert and lower load every model with load_model
        return found

    def __iter__(self) -> Iterator[object]:
        yield self.model
        yield self.report

    def save(
        self, path: str | os.PathLike[str], *, external_data: str = AUTO, force: bool = False
    ) -> Path:
        """Write complete or not at all, never over an input file (the same file by inode,
        whatever the path's spelling) nor onto anything but a regular file; an existing file
        is replaced only with ``force`` (and never a read-only one). A model not checked yet
        is checked on disk. See :mod:`quantgraph.ir.output_files`."""
        external = has_external_data(self.model)
        return save_model(
            self.model if external else self.proto,
            path,
            external_data=external_data,
            force=force,
            protect=self.sources,
            check=not self.checked,
        )


# The name before lower() had a result of its own name; the same class, the same attributes.
ConvertResult = RewriteResult


def convert(
    model: ModelLike,
    *,
    static: bool = False,
    contrib: bool = True,
    check: bool = True,
    progress: Progress | None = None,
    keep_float: Sequence[str] = (),
) -> RewriteResult:
    """Rewrite ``model``'s QuantizeLinear/DequantizeLinear into quantgraph's ops.

    ``static=True`` emits Quantize/Dequantize (attributes ``scales``/``zps``) wherever scale
    and zero point are constants. The input (path, bytes, proto or ir.Model) is never modified.
    With ``check``, the result must pass ``onnx.checker.check_model(full_check=True)`` (for
    models with external data, when it is saved: the checker reads the weights from disk).
    ``contrib=False`` keeps com.microsoft Q/DQ as they are (listed in the report).
    ``progress(done, total)`` is called as Q/DQ nodes are rewritten. A model with nothing
    quantized (a float model) raises :class:`~quantgraph.errors.NoQuantization`.
    ``keep_float``: tensors or nodes whose Q->DQ pairs are removed first
    (:func:`quantgraph.passes.keep_float.keep_float`; the result's original is that model).
    """
    report = RewriteReport()
    with collector_paused():
        if keep_float:
            model = float_kept(
                _private_copy(model), keep_float, _label(model).rstrip(": ") or "the model"
            )
        loaded = _private_copy(model)
        refuse_unquantized(loaded, _label(model))
        external = has_external_data(loaded)
        report.already = _count(loaded, lambda n: spec_op(n) is not None)
        # The passes declare what they need (supported opset, schemas registered): requires.
        manager = pipelines.conversion(
            report, static=static, contrib=contrib, check=check and not external, progress=progress
        )
        _run(manager, loaded, model)
    return RewriteResult(loaded, report, check and not external, _sources(loaded, model))


def lower(
    model: ModelLike, *, check: bool = True, allow_partial: bool = False, to_qdq: bool = False
) -> RewriteResult:
    """Rewrite quantgraph's ops back into QuantizeLinear/DequantizeLinear: ONNX's where the
    model's opset can express them, com.microsoft's where it cannot (per-axis below opset 13)
    or where they came from.

    A converted com.microsoft MatMulNBits goes back to MatMulNBits (same attributes and bytes);
    ``to_qdq=True`` writes its Q/DQ form instead (blocked DequantizeLinear -> MatMul, opset 21).
    A quantgraph op that cannot be lowered raises :class:`ModelError` (the result would need
    quantgraph to run) unless ``allow_partial``: then it stays and is listed in the report.
    """
    report = RewriteReport()
    with collector_paused():
        loaded = _private_copy(model)
        external = has_external_data(loaded)
        report.already = _count(loaded, _is_qdq)
        manager = pipelines.lowering(report, check=check and not external, to_qdq=to_qdq)
        _run(manager, loaded, model)
    if report.skipped and not allow_partial:
        first = report.skipped[0]
        more = f" (and {len(report.skipped) - 1} more)" if len(report.skipped) > 1 else ""
        raise ModelError(
            f"{_label(model)}{len(report.skipped)} quantgraph op(s) cannot be lowered: node "
            f"'{first.node}' ({first.op_type}): {first.reason}{more}; allow_partial=True "
            "(--allow-partial) keeps them in the result"
        )
    return RewriteResult(loaded, report, check and not external, _sources(loaded, model))


def _private_copy(model: ModelLike) -> ir.Model:
    # Passes rewrite in place: an ir.Model argument is the caller's object.
    return copy_model(model, as_read=True) if isinstance(model, ir.Model) else load_model(model)


def _sources(loaded: ir.Model, model: ModelLike) -> tuple[Path, ...]:
    # An ir.Model the caller loaded with quantgraph still names its files: protect them too.
    return source_files(loaded) or (source_files(model) if isinstance(model, ir.Model) else ())


def _count(model: ir.Model, wanted: Callable[[ir.Node], bool]) -> dict[str, int]:
    """Nodes of every graph and function that ``wanted`` picks, per op type."""
    found = Counter(n.op_type for graph in all_graphs(model) for n in graph if wanted(n))
    return dict(sorted(found.items()))


def _is_qdq(node: ir.Node) -> bool:
    """ONNX's or com.microsoft's QuantizeLinear/DequantizeLinear (what lower emits)."""
    standard = is_standard(node) or node.domain == "com.microsoft"
    return standard and node.op_type in ("QuantizeLinear", "DequantizeLinear")


def _label(source: ModelLike) -> str:
    return f"{source}: " if isinstance(source, (str, os.PathLike)) else ""


def _run(manager: ir.passes.PassManager, loaded: ir.Model, source: ModelLike) -> None:
    try:
        pipelines.run(manager, loaded)
    except ModelError as error:  # a pass found the input unusable: name the file too
        raise ModelError(f"{_label(source)}{error}") from None
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        broken = _input_check_error(loaded)
        if broken is not None:  # the input was broken before quantgraph touched it
            message = (
                f"{_label(source)}the input model fails onnx.checker (full_check), before any "
                f"rewrite: {_first_line(broken)}"
            )
        else:
            message = (
                f"{_label(source)}the result fails onnx.checker (full_check): {_first_line(error)}"
            )
        raise ModelError(message) from error


def _input_check_error(loaded: ir.Model) -> Exception | None:
    """The checker's error on the model as it was read, or None when it passes."""
    original = original_model(loaded)
    if original is None:
        return None
    try:
        onnx.checker.check_model(ir.to_proto(original), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        return error
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
