"""What the command line prints for people: conversions, validations, output summaries.

Part of the command line (a module per command); ``--json`` prints the reports' own
``to_dict()`` instead.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from ..ir.name_groups import grouped
from .args.base import group_option

WIDTH = 100  # the help's max_content_width
NAMES_SHOWN = 3  # node names per skip reason without --verbose

VERBOSE_OPTION = group_option(
    "render_text",
    "--verbose",
    "-v",
    is_flag=True,
    help="List in full: every node converted and, per reason, every node left unchanged; "
    "every unit of a fusion plan (without it the lists are cut, a plan summed up one line per "
    "engine; --json always lists all).",
)


def describe(name: str, value: Any) -> dict[str, Any]:
    import numpy as np

    array = np.asarray(value)
    finite = array[np.isfinite(array)] if array.dtype.kind == "f" else array
    return {
        "name": name,
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "min": finite.min().item() if finite.size else None,
        "max": finite.max().item() if finite.size else None,
    }


def print_outputs(summary: list[dict[str, Any]]) -> None:
    """``run``'s outputs, each as :func:`describe` summarized it."""
    for item in summary:
        click.echo(
            f"  {item['name']}: {item['dtype']}{item['shape']} min {item['min']} max {item['max']}"
        )


def print_generated(inputs: dict[str, dict[str, Any]], seed: int) -> None:
    """``run``'s generated inputs on stderr, one line each: what they are and where their sizes
    came from (as ``validate`` prints them; a decoder's cache as one line)."""
    from ..validation.inputs.plan import describe_shape

    described = []
    for name, spec in inputs.items():
        shape = ",".join(map(str, spec["shape"]))
        span = f" in [{spec['range'][0]:g}, {spec['range'][1]:g}]" if spec.get("range") else ""
        sizes = describe_shape(spec["shape"], spec.get("shape_from", []))
        sizes = f"; sizes: {sizes}" if sizes else ""
        described.append((name, f"{spec['dtype']}[{shape}]{span}, {spec['why']}{sizes}"))
    for group in grouped(described):
        click.echo(
            f"generated input '{group.label}'{group.count} (seed {seed}): {group.key}", err=True
        )


def print_conversion(
    report: Any,
    dry_run: bool,
    out: Path | None,
    limit: int = 40,
    *,
    lowering: bool = False,
    verbose: bool = False,
) -> None:
    if verbose:
        limit = sys.maxsize
    verb = "would convert" if dry_run else "converted"
    total = sum(report.converted.values())
    counts = ", ".join(f"{n} {op}" for op, n in report.converted.items()) or "nothing"
    there = ", ".join(f"{n} {op}" for op, n in report.already.items())
    if total == 0 and report.already and not lowering:  # a model converted before
        ops = sum(report.already.values())
        click.echo(f"already converted: {ops} spec ops ({there}), nothing left to rewrite")
    else:
        click.echo(f"{verb} {total} node(s): {counts}")
        if report.already:
            click.echo(f"already there before the rewrite: {there}")
    for node in report.converted_nodes[:limit]:
        where = f" (in {node.graph})" if node.graph else ""
        click.echo(
            f"  {node.node or '<unnamed>'}{where}: {node.op_type} -> {node.new_op_type} "
            f"[{node.detail}]"
        )
    if len(report.converted_nodes) > limit:
        click.echo(f"  ... and {len(report.converted_nodes) - limit} more (--verbose lists all)")
    if report.skipped:
        _print_skipped(report.skipped, limit, verbose)
    _print_other_quantized(report.other_quantized, limit)
    if report.unchecked:
        ops = ", ".join(f"{n} {op}" for op, n in report.unchecked.items())
        click.echo(
            f"kept as they are, unknown to onnx.checker (onnxruntime runs them): {ops}; the "
            "rest of the result passed the full check"
        )
    if out is not None and not dry_run:
        click.echo(f"wrote {out}")


def _print_skipped(skipped: list[Any], limit: int, verbose: bool) -> None:
    """Nodes left unchanged grouped by op and reason (a CRNN's 60 int32 biases are one line),
    each reason with a few node names, every name under ``verbose``."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in skipped:
        where = f" (in {node.graph})" if node.graph else ""
        groups.setdefault((node.op_type, node.reason), []).append(
            f"{node.node or '<unnamed>'}{where}"
        )
    click.echo(f"left unchanged {len(skipped)} node(s), {len(groups)} reason(s):")
    for (op_type, reason), names in list(groups.items())[:limit]:
        click.echo(f"  {len(names)} x {op_type}: {reason}")
        shown = names if verbose else names[:NAMES_SHOWN]
        more = len(names) - len(shown)
        rest = f", ... ({more} more; --verbose lists all)" if more else ""
        click.echo(f"      {', '.join(shown)}{rest}")
    if len(groups) > limit:
        click.echo(f"  ... and {len(groups) - limit} more reasons (--verbose lists all)")


def _wrapped(text: str, indent: str = "  ", hanging: str | None = None) -> None:
    """A long explanation as an indented paragraph (terminal lines stay short); ``hanging``:
    the indent of the lines after the first (default: ``indent``)."""
    later = indent if hanging is None else hanging
    for line in textwrap.wrap(text, width=WIDTH, initial_indent=indent, subsequent_indent=later):
        click.echo(line)


def _print_other_quantized(nodes: list[Any], limit: int) -> None:
    """Quantized nodes that are not Q/DQ: each node with its reason code, each code's advice
    once."""
    if not nodes:
        return
    click.echo(f"other quantized formats, left as they are: {len(nodes)} node(s):")
    for node in nodes[:limit]:
        where = f" (in {node.graph})" if node.graph else ""
        click.echo(f"  {node.node or '<unnamed>'}{where}: {node.op_type} [{node.code}]")
    if len(nodes) > limit:
        click.echo(f"  ... and {len(nodes) - limit} more (--verbose lists all)")
    for code, advice in dict((n.code, n.advice) for n in nodes).items():
        click.echo(f"  [{code}] {advice}")


def _memory_text(memory: Any) -> str:
    from ..validation.options import size_text

    budget = (
        "no budget"
        if memory.budget is None
        else f"--memory-budget {size_text(memory.budget)} beside the weights"
    )
    text = f"estimated {size_text(memory.estimate)} (weights {size_text(memory.weights)}); {budget}"
    if memory.unresolved:
        text += (
            f"; {memory.unresolved} tensor(s) shape inference could not size counted as their "
            "known dims or their node's largest input"
        )
    return text


def _print_tried(tried: Any, memory: Any) -> None:
    """What the search did with every plan: those run one a line, the skipped ones by reason."""
    from ..validation.options import size_text

    def estimate(one: Any) -> str:
        return "not estimated" if one.estimate is None else size_text(one.estimate)

    click.echo("  tried, smallest estimated memory first:")
    skipped: dict[str, list[Any]] = {}
    for one in tried:
        if one.status in ("ran", "failed"):
            click.echo(f"    {one.number} {one.plan}: {estimate(one)}, {one.status}")
        else:
            skipped.setdefault(one.status, []).append(one)
    for status, plans in skipped.items():
        first = plans[0]
        click.echo(
            f"    {len(plans)} {status} (from {first.number} {first.plan}: {estimate(first)})"
        )


def print_validation(report: Any) -> None:
    from ..validation.inputs.plan import defaulted_dims
    from .render_debug import print_debug

    click.echo(f"comparison: {report.comparison}")
    if report.comparison_note:
        _wrapped(f"why: {report.comparison_note}")
    samples = "1 sample" if report.samples == 1 else f"{report.samples} samples"
    seed = "" if report.seed is None else f" (seed {report.seed})"
    cases = getattr(report, "cases", None)
    if cases:  # a decoder: each sample named by its step
        click.echo(f"inputs: {samples}: {'; '.join(report.sample_names)}")
    else:
        click.echo(f"inputs: {samples}{seed}")
    search = getattr(report, "input_search", None)
    if search is not None:
        refused = "the original refused the first plan"
        if search.tried and search.tried[0].status == "over budget":
            refused = "the first plan was not run"
        click.echo(
            f"  {refused} ({search.first_error}); "
            f"search attempt {search.attempt} runs: {search.plan}"
        )
        _print_tried(search.tried, report.memory)
    if getattr(report, "memory", None) is not None:
        click.echo(f"  memory: {_memory_text(report.memory)}")
    # A decoder's KV cache: inputs alike but for their numbers are one line each (name_groups).
    defaulted = grouped(
        (name, (axis, size, source)) for name, axis, size, source in defaulted_dims(report.inputs)
    )
    if defaulted:
        dims = (f"{g.label}:{g.key[0]} = {g.key[1]} ({g.key[2]}){g.count}" for g in defaulted)
        _wrapped(f"defaulted: {', '.join(dims)}")
    for case, inputs in (cases or {"": report.inputs}).items():
        indent = "  "
        if case:
            click.echo(f"  {case}:")
            indent = "    "
        for group in grouped((name, _input_text(spec)) for name, spec in inputs.items()):
            text, sizes = group.key
            click.echo(f"{indent}{group.label}: {text}{group.count}")
            if sizes:
                click.echo(f"{indent}  sizes: {sizes}")
    like = getattr(report, "like_reference", None)
    bound = getattr(report, "bound", None)
    if like is not None:
        click.echo(f"reference: {like.describe()}")
        _wrapped(f"why: {like.why()}")
    if bound is not None:
        click.echo("bound: a bound the model gives, per output (--atol/--rtol override it)")
        _wrapped(f"how: {bound.rule()}")
    if not report.exact_expected:
        _wrapped(f"criterion: {report.criterion}", indent="", hanging="  ")
    for output in report.outputs:
        verdict = "identical" if output.agree else "DIFFERENT"
        judge = "tolerance" if bound is None else _bound_text(bound, output.name)
        if not output.agree and not report.exact_expected:
            good = report.output_agrees(output)
            if report.min_sqnr is None:
                verdict += f" (within {judge})" if good else f" (BEYOND {judge})"
            else:
                verdict += " (meets the criterion)" if good else " (BEYOND the criterion)"
        click.echo(
            f"  {output.name}: {verdict}  dtype={output.dtype} max_abs_diff="
            f"{output.max_abs_diff:g} mismatches={output.mismatches}/{output.elements} "
            f"max_ulp_diff={output.max_ulp_diff}{_in_steps(report, output.name)}"
            f"{_sqnr_text(report, output.name)}"
        )
    if like is not None and getattr(report, "as_run", None):
        _informational(
            report, "the original as onnxruntime runs it", like.original_note(), report.as_run
        )
    if report.few_values:
        _wrapped(f"note: {report.few_values}", indent="", hanging="  ")
    if report.optimized:
        from ..validation.report import OPTIMIZED_NOTE  # validation loads onnxruntime

        _informational(report, "original at ORT_ENABLE_ALL", OPTIMIZED_NOTE, report.optimized)
    if getattr(report, "onnx_arithmetic", None):
        from ..validation.report import ONEDNN_NOTE

        _informational(
            report,
            "original in ONNX's arithmetic",
            ONEDNN_NOTE,
            report.onnx_arithmetic,
            report.onnx_arithmetic_steps,
        )
    if report.intermediate is not None:
        found = report.intermediate
        click.echo(
            f"intermediate tensors: {found.tensors_compared} compared, "
            f"{found.tensors_differing} differ"
        )
        if getattr(report, "debug", None) is not None:
            print_debug(report.debug, report.original, report.rewritten)
        first = found.first_divergence
        if first is not None:
            click.echo(
                f"  first divergence: node '{first.node}' ({first.op_type}, now "
                f"{first.rewritten_op_type}) output '{first.tensor}': max_abs_diff="
                f"{first.max_abs_diff:g} max_ulp_diff={first.max_ulp_diff} "
                f"mismatches={first.mismatches}/{first.elements}"
            )
        if getattr(found, "partitions", None) is not None:
            _print_partitions(found)
    if getattr(report, "generation", None) is not None:
        print_generation(report.generation)
    verdict = "the models agree" if report.agree else "the models DISAGREE"
    if report.optimized:
        verdict += " (from the ORT_DISABLE_ALL comparison only)"
    elif getattr(report, "onnx_arithmetic", None):
        verdict += " (in oneDNN's arithmetic)"
    click.echo(f"verdict: {verdict}")


def _input_text(spec: Mapping[str, Any]) -> tuple[str, str]:
    """An input as ``validate`` tells it: ``float32[1x4x0x64] (standard normal)``, and where its
    open sizes came from (empty when the model fixes them)."""
    from ..validation.inputs.plan import describe_shape

    shape = "x".join(map(str, spec["shape"])) or "scalar"
    source = spec.get("why") or spec.get("from", "")
    span = ""
    if spec.get("range"):
        low, high = spec["range"]
        span = f" in [{low:g}, {high:g}]"
    sizes = describe_shape(spec["shape"], spec.get("shape_from", []))
    return f"{spec['dtype']}[{shape}]{span} ({source})", sizes


def _bound_text(bound: Any, name: str) -> str:
    spread = bound.spread.get(name, 0.0)
    return f"bound {bound.atol(name):.3g}: spread {spread:.3g}"


GENERATION_ROWS = 16  # steps listed from the first; those around where the models part, too


def print_generation(found: Any) -> None:
    """A decoder's greedy generation on both models: a row per step, then one line."""
    if found.skipped is None:
        seed = f"seed {found.seed}"
        click.echo(
            f"generation: a prompt of {len(found.prompt)} token ids ({seed}), the prefill then "
            f"{len(found.steps) - 1} steps, each model feeding back its own token and cache"
        )
        if found.capped:
            _wrapped(f"capped: {found.capped}")
        marks = {found.first_divergence, found.first_failing} - {None}
        shown = {s.step for s in found.steps[:GENERATION_ROWS]}
        shown |= {k for m in marks for k in range(m - 1, m + 2)}
        click.echo(f"  {'step':>4}  {'original':>8}  {'rewritten':>9}  logits")
        last = -1
        for step in found.steps:
            if step.step not in shown:
                continue
            if step.step > last + 1:
                click.echo(f"  ... {step.step - last - 1} steps (--json lists every step)")
            last = step.step
            click.echo(
                f"  {step.step:>4}  {step.token_original:>8}  {step.token_rewritten:>9}  "
                f"{_step_verdict(step, found.tolerance is None)} max_abs_diff="
                f"{step.logits.max_abs_diff:g}{'' if step.same_token else '  <- tokens part'}"
            )
        if last < len(found.steps) - 1:
            click.echo(f"  ... {len(found.steps) - 1 - last} steps (--json lists every step)")
    click.echo(found.verdict())


def _step_verdict(step: Any, exact: bool) -> str:
    if not step.judged:
        return "not judged (fed other tokens)"
    if step.logits.agree:
        return "identical"
    if exact:
        return "DIFFERENT"
    return "within tolerance" if step.passes else "BEYOND tolerance"


def _steps_text(steps: float | None) -> str:
    return "no step" if steps is None else f"{steps:.3g} steps"


def _print_partitions(found: Any, limit: int = 10) -> None:
    """Each oneDNN partition alone against the spec's composition of its ops."""
    checks = found.partitions
    differing = [c for c in checks if c.introduces or c.note]
    click.echo(
        f"oneDNN partitions: {len(checks)} run alone on the spec composition's inputs "
        f"(the original at ORT_DISABLE_ALL), {sum(c.introduces for c in checks)} introduce "
        "a difference"
    )
    first = found.first_partition_divergence
    if first is not None:
        click.echo(
            f"  first partition divergence: '{first.node}' ({first.kernel}) output "
            f"'{first.tensor}': introduces {_steps_text(first.max_abs_diff_steps)} "
            f"(max_abs_diff={first.max_abs_diff:g} mismatches={first.mismatches}/{first.elements})"
        )
    for check in differing[:limit]:
        line = f"  {check.compute}: " + (
            check.note
            or f"introduces {_steps_text(check.introduced_steps)}, shows "
            f"{_steps_text(check.inherited_steps)} in the fused run"
        )
        click.echo(line + (f" ({check.reason})" if check.reason else ""))
    if len(differing) > limit:
        click.echo(f"  ... {len(differing) - limit} more (--json lists every partition)")


def _informational(
    report: Any,
    what: str,
    note: str,
    comparisons: Any,
    steps: dict[str, float | None] | None = None,
) -> None:
    """A comparison beside the verdict, judged by the tolerance (or the verdict's bound),
    never deciding it."""
    atol, rtol = report.tolerance
    bound = getattr(report, "bound", None) if what.startswith("the original as") else None
    judged = f"atol={atol:g} rtol={rtol:g}" if bound is None else "judged by the bound"
    click.echo(f"informational, not part of the verdict: {what} vs rewritten ({judged})")
    _wrapped(f"why: {note}")
    for output in comparisons:
        judge = "tolerance" if bound is None else "bound"
        verdict = f"within {judge}" if output.within_tolerance else f"BEYOND {judge}"
        apart = (steps or {}).get(output.name)
        click.echo(
            f"  {output.name}: {verdict}  max_abs_diff={output.max_abs_diff:g} "
            f"mismatches={output.mismatches}/{output.elements} "
            f"beyond_tolerance={output.beyond_tolerance}"
            + ("" if apart is None else f" max_diff_steps={apart:.3g}")
        )


def _sqnr_text(report: Any, name: str) -> str:
    """An output's SQNR where an SQNR judges it (a float original)."""
    if report.min_sqnr is None:
        return ""
    found = report.output_sqnr(name)
    return " sqnr=none" if found is None else f" sqnr={found:.1f}dB"


def _in_steps(report: Any, name: str) -> str:
    """The largest difference in quantization steps, where a comparison is not exact."""
    stats = getattr(report, "error_stats", {}).get(name)
    steps = None if stats is None or report.exact_expected else stats.max_steps
    return "" if steps is None else f" max_diff_steps={steps:.3g}"


def print_support(backend: str, engine: str | None, support: Any) -> None:
    """Which spec nodes ``backend`` runs (quantgraph.runtime.support)."""
    counts = {
        status: sum(1 for s in support if s.status == status)
        for status in ("runs", "refused", "unknown")
    }
    where = f", {engine}" if engine else ""
    click.echo(
        f"backend {backend}{where}: {counts['runs']} nodes run, {counts['refused']} refused, "
        f"{counts['unknown']} unknown"
    )
    for item in support:
        if item.status == "runs":
            continue
        if f"node '{item.node}'" in item.reason:  # the kernel's message names op and node
            click.echo(f"  {item.status}: {item.reason}")
        else:
            click.echo(f"  {item.status}: {item.op} node '{item.node}': {item.reason}")


def print_plan(plan: Any, limit: int = 40, *, verbose: bool = True) -> None:
    """A session's fusion plan (quantgraph.fusion): its units, then the spec ops left alone;
    without ``verbose``, one line per engine and the decision's (auto) in a line."""
    click.echo(
        f"fusion {plan.mode}: {len(plan.units)} unit(s) with {plan.fused_nodes} spec op(s); "
        f"{len(plan.alone)} spec op(s) alone"
    )
    if not verbose:
        _print_plan_summary(plan)
        return
    for unit in plan.units[:limit]:
        compute = f"{unit.compute} ({unit.op_type})" if unit.compute else "Q/DQ only"
        where = f" (in {unit.graph})" if unit.graph else ""
        click.echo(
            f"  unit {compute}{where} -> {unit.engine} {unit.kernel}: {', '.join(unit.nodes)}"
        )
    if len(plan.units) > limit:
        click.echo(f"  ... and {len(plan.units) - limit} more units (--json lists all)")
    for alone in plan.alone[:limit]:
        where = f" (in {alone.graph})" if alone.graph else ""
        click.echo(f"  alone {alone.node}{where} ({alone.op_type}): {alone.reason}")
    if len(plan.alone) > limit:
        click.echo(f"  ... and {len(plan.alone) - limit} more (--json lists all)")
    if getattr(plan, "tuning", None) is not None:
        print_tuning(plan.tuning)


def _print_plan_summary(plan: Any) -> None:
    """Each engine in one line (its units, spec ops and kernels, most frequent first), the
    spec ops left alone in one, fusion "auto"'s decision in one."""
    engines: dict[str, list[Any]] = {}
    for unit in plan.units:
        engines.setdefault(unit.engine, []).append(unit)
    for engine, units in engines.items():
        kernels: dict[str, int] = {}
        for unit in units:
            kernel = unit.kernel.split(" (")[0].split(":")[0] if unit.compute else "Q/DQ only"
            kernels[kernel] = kernels.get(kernel, 0) + 1
        ranked = sorted(kernels.items(), key=lambda item: (-item[1], item[0]))
        shown = ", ".join(f"{n} {kernel}" for kernel, n in ranked[:4])
        more = f", {len(ranked) - 4} other kernel(s)" if len(ranked) > 4 else ""
        ops = sum(len(u.nodes) for u in units)
        click.echo(f"  {engine}: {len(units)} unit(s), {ops} spec op(s): {shown}{more}")
    if plan.alone:
        reasons = {a.reason for a in plan.alone}
        click.echo(
            f"  alone on the backend: {len(plan.alone)} spec op(s), {len(reasons)} reason(s)"
        )
    decision = getattr(plan, "tuning", None)
    if decision is not None:
        click.echo(f"  auto: {decision.why}")
    click.echo("  (--verbose lists every unit and why each spec op runs alone)")


def shapes_text(shapes: Mapping[str, Sequence[int]]) -> str:
    """``input_ids[1x1], past_key_values.*.{key,value}[1x4x128x64] (44 inputs)``: inputs whose
    names differ in their numbers only and that share a shape are one item (a decoder's KV
    cache; :func:`quantgraph.ir.name_groups.grouped`)."""
    items = grouped((name, tuple(shape)) for name, shape in shapes.items())
    return ", ".join(f"{g.label}[{'x'.join(map(str, g.key))}]{g.count}" for g in items)


def print_tuning(decision: Any) -> None:
    """Fusion "auto"'s decision (quantgraph.fusion.auto.tuner.Decision) and what it was measured on:
    each candidate's median and quartiles, how often it was measured and how long ago."""
    click.echo(f"auto: {decision.why}")
    if decision.shapes:
        shapes = shapes_text(decision.shapes)
        how = {"": "", "processes": ", each plan in a process of its own"}.get(
            decision.isolation, f", {decision.isolation}"
        )
        times = decision.measurements
        measurements = f" in {times} measurements" if times > 1 else ""
        click.echo(f"  measured at {shapes}, {decision.rounds} rounds{measurements}{how}")
    age = decision.age_seconds()
    if age is not None and decision.source == "cache":
        click.echo(f"  cached {_age(age)} ago")
    for candidate in decision.candidates:
        ms = decision.times_ms.get(candidate.name)
        ratio = decision.ratios.get(candidate.name)
        spread = decision.spread_ms.get(candidate.name)
        ratios = decision.ratio_spread.get(candidate.name)
        timing = "" if ms is None else f": {ms:.3f} ms a run"
        timing += "" if spread is None else f" ({spread[0]:.3f}-{spread[1]:.3f})"
        timing += "" if ratio is None else f", {ratio:.2f}x of plan 'onnxruntime'"
        timing += "" if ratios is None else f" ({ratios[0]:.2f}-{ratios[1]:.2f})"
        dropped = decision.dropped.get(candidate.name)
        timing += "" if dropped is None else f": dropped ({dropped})"
        mark = "*" if candidate.name == decision.choice.name else " "
        click.echo(f"  {mark} plan '{candidate.name}' ({candidate.to_onednn} to oneDNN){timing}")
    if decision.candidates and decision.spread_ms:
        click.echo("  (in parentheses: the first and third quartiles of the rounds)")
    if decision.cache_file:
        click.echo(f"  cache: {decision.cache_file}")


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"
