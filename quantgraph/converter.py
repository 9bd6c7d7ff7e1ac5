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
from .ir.checker import OpKey, check_proto, unregistered
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
from .ir.opsets import check_opset
from .ir.walk import all_graphs, graphs_fixed, is_standard, spec_op
from .passes import RewriteReport, pipelines
from .passes.floating.float_model import is_quantized, no_quantization, refuse_unconverted
from .passes.floating.keep_float import keep_float as float_kept
from .passes.floating.keep_float import weights_named
from .passes.full_check import checked_bytes, checked_proto
from .passes.node_rewrite import Progress
from .runtime import onnxruntime_ops


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
    accepted: frozenset[OpKey] = frozenset()

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
        checked = None if external else checked_bytes(self.model)
        return save_model(
            self.model if external else checked if checked is not None else self.proto,
            path,
            external_data=external_data,
            force=force,
            protect=self.sources,
            check=not self.checked,
            accepted=self.accepted,
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
    float_model: ModelLike | None = None,
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
    (:func:`quantgraph.passes.floating.keep_float.keep_float`; the result's original is that
    model); a node with quantized weights takes its weights from ``float_model`` (the model
    ``model`` was quantized from), which it then needs.
    """
    report = RewriteReport()
    with collector_paused():
        if keep_float:
            model = _kept_float(model, keep_float, float_model)
        loaded = _private_copy(model)
        # One walk finds the graphs for the survey, the external data and every pass.
        with graphs_fixed(loaded):
            survey = _survey(loaded, lambda n: spec_op(n) is not None, quantized=True)
            if not survey.quantized:
                raise no_quantization(survey.op_types, _label(model))
            external = has_external_data(loaded)
            report.already = survey.wanted
            accepted = _accepted_unknown_ops(survey, report)
            # The passes declare what they need (supported opset, schemas registered): requires.
            manager = pipelines.conversion(
                report,
                static=static,
                contrib=contrib,
                check=check and not external,
                progress=progress,
                accepted=accepted,
            )
            _run(manager, loaded, model, accepted)
    checked = check and not external
    return RewriteResult(loaded, report, checked, _sources(loaded, model), accepted)


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
    A model holding no quantgraph op raises :class:`~quantgraph.errors.NothingToLower`.
    """
    report = RewriteReport()
    with collector_paused():
        loaded = _private_copy(model)
        check_opset(loaded, model)  # an opset quantgraph cannot read says so first
        with graphs_fixed(loaded):  # one walk finds the graphs for every step below
            refuse_unconverted(loaded, _label(model))
            external = has_external_data(loaded)
            survey = _survey(loaded, _is_qdq)
            report.already = survey.wanted
            accepted = _accepted_unknown_ops(survey, report)
            manager = pipelines.lowering(
                report, check=check and not external, to_qdq=to_qdq, accepted=accepted
            )
            _run(manager, loaded, model, accepted)
    if report.skipped and not allow_partial:
        first = report.skipped[0]
        more = f" (and {len(report.skipped) - 1} more)" if len(report.skipped) > 1 else ""
        raise ModelError(
            f"{_label(model)}{len(report.skipped)} quantgraph op(s) cannot be lowered: node "
            f"'{first.node}' ({first.op_type}): {first.reason}{more}; allow_partial=True "
            "(--allow-partial) keeps them in the result"
        )
    return RewriteResult(loaded, report, check and not external, _sources(loaded, model), accepted)


def _accepted_unknown_ops(survey: _Survey, report: RewriteReport) -> frozenset[OpKey]:
    """The original's ops in ONNX's domain that onnx does not define and onnxruntime runs
    (onnxruntime-genai's SimplifiedLayerNormalization): the result is held to the checker no
    more strictly than the original. Others stay refused (the checker names them)."""
    accepted: set[OpKey] = set()
    for (domain, op_type), names in survey.unregistered.items():
        if onnxruntime_ops.registered(domain, op_type):
            accepted.add((domain, op_type))
            report.unchecked[op_type if not domain else f"{domain}.{op_type}"] = len(names)
    return frozenset(accepted)


def _kept_float(model: ModelLike, names: Sequence[str], float_model: ModelLike | None) -> ir.Model:
    copy, label = _private_copy(model), _label(model).rstrip(": ") or "the model"
    weighted = weights_named(copy, names) if float_model is None else []
    if weighted:
        raise ModelError(
            f"--keep-float: node '{weighted[0]}' of {label} has quantized weights, which only "
            "the float model has in float: add --float-model FLOAT (the model it was quantized "
            "from)"
        )
    floating = load_model(float_model) if float_model is not None else None
    return float_kept(copy, names, label, float_model=floating)


def _private_copy(model: ModelLike) -> ir.Model:
    # Passes rewrite in place: an ir.Model argument is the caller's object.
    return copy_model(model, as_read=True) if isinstance(model, ir.Model) else load_model(model)


def _sources(loaded: ir.Model, model: ModelLike) -> tuple[Path, ...]:
    # An ir.Model the caller loaded with quantgraph still names its files: protect them too.
    return source_files(loaded) or (source_files(model) if isinstance(model, ir.Model) else ())


@dataclass
class _Survey:
    """What convert and lower ask of a model before their pipelines, from one walk of every
    graph and function (a walk costs ~0.2 s on a 100k-node model)."""

    wanted: dict[str, int]  # nodes the caller picks, per op type (the report's "already")
    unregistered: dict[OpKey, list[str]]  # ONNX-domain ops onnx does not know: node names
    op_types: Counter[str]  # every node, per op type (what a float model holds)
    quantized: bool  # some node is quantized (asked only with quantized=True)


def _survey(
    model: ir.Model, wanted: Callable[[ir.Node], bool], *, quantized: bool = False
) -> _Survey:
    picked: Counter[str] = Counter()
    unknown: dict[OpKey, list[str]] = {}
    op_types: Counter[str] = Counter()
    found = not quantized  # nothing to look for
    opsets = model.opset_imports
    for graph in all_graphs(model):
        for node in graph:
            op_type = node.op_type
            op_types[op_type] += 1
            if not found and is_quantized(node):
                found = True
            if wanted(node):
                picked[op_type] += 1
            if unregistered(node, opsets):
                unknown.setdefault((node.domain, op_type), []).append(node.name or op_type)
    return _Survey(dict(sorted(picked.items())), unknown, op_types, found)


def _is_qdq(node: ir.Node) -> bool:
    """ONNX's or com.microsoft's QuantizeLinear/DequantizeLinear (what lower emits)."""
    standard = is_standard(node) or node.domain == "com.microsoft"
    return standard and node.op_type in ("QuantizeLinear", "DequantizeLinear")


def _label(source: ModelLike) -> str:
    return f"{source}: " if isinstance(source, (str, os.PathLike)) else ""


def _run(
    manager: ir.passes.PassManager,
    loaded: ir.Model,
    source: ModelLike,
    accepted: frozenset[OpKey] = frozenset(),
) -> None:
    try:
        pipelines.run(manager, loaded)
    except ModelError as error:  # a pass found the input unusable: name the file too
        raise ModelError(f"{_label(source)}{error}") from None
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        broken = _input_check_error(loaded, accepted)
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


def _input_check_error(loaded: ir.Model, accepted: frozenset[OpKey]) -> Exception | None:
    """The checker's error on the model as it was read, or None when it passes."""
    original = original_model(loaded)
    if original is None:
        return None
    try:
        check_proto(ir.to_proto(original), accepted)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        return error
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
