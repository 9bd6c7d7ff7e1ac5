"""quantgraph command line: convert, lower, validate, run, inspect, bench.

Only the command line (this module and the cli_*.py beside it: shared helpers, bench, options,
text, JSON, process handling) knows about terminals, exit codes and JSON printing.
Exit codes: 0 success (validate: the models agree), 1 validate found a disagreement,
2 an error (one line on stderr; --debug shows the traceback).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import click

from .cli_bench import bench
from .cli_common import (
    EXIT_DISAGREE,
    EXIT_OK,
    bound_dims,
    bound_ranges,
    errors_are_one_line,
    print_json,
    quiet_onnxruntime,
)
from .cli_json import JsonErrorGroup
from .cli_options import (
    ARITHMETIC_OPTION,
    BACKEND_OPTION,
    DIM_OPTION,
    FUSION_OPTION,
    GENERATION_OPTIONS,
    INPUTS_HELP,
    ITERATIONS_OPTION,
    JSON_OPTION,
    SEED_OPTION,
    VAL_RANGE_OPTION,
    VALIDATE_OPTIONS,
    refuse_given,
)
from .cli_process import (
    DebugAnywhere,
    Interrupted,
    exit_interrupted,
    install_interrupt_handler,
    validation_failed,
)
from .cli_text import (
    describe,
    print_conversion,
    print_plan,
    print_support,
    print_validation,
)
from .ir.output_files import check_output
from .progress import Bar, Status


class QuantgraphGroup(DebugAnywhere, JsonErrorGroup):
    """``--debug`` anywhere (cli_process) and usage errors as JSON under --json (cli_json)."""


@click.group(
    cls=QuantgraphGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--debug", is_flag=True, help="Show full tracebacks on errors (also after the command)."
)
@click.version_option(package_name="quantgraph")
def main(debug: bool) -> None:
    """Rewrite ONNX QuantizeLinear/DequantizeLinear into oneDNN-Graph-style quantization ops
    (DynamicQuantize, DynamicDequantize, Quantize, Dequantize), run them in onnxruntime, and
    prove the rewritten model agrees with the original.

    \b
    Typical use:
      quantgraph inspect model.onnx            what would be rewritten, what not and why
      quantgraph convert model.onnx out.onnx --validate
      quantgraph validate model.onnx out.onnx --json
      quantgraph run out.onnx --inputs in.npz --output out.npz
    """


@main.command()
@click.argument("model_in", metavar="IN", type=click.Path(dir_okay=True, path_type=Path))
@click.argument("model_out", metavar="OUT", type=click.Path(path_type=Path), required=False)
@click.option(
    "--static",
    is_flag=True,
    help="Emit static Quantize/Dequantize (scales/zps attributes) where scale and "
    "zero point are constants.",
)
@click.option(
    "--validate",
    "validate_result",
    is_flag=True,
    help="Run original and rewritten model on the same random inputs and compare.",
)
@BACKEND_OPTION
@ARITHMETIC_OPTION
@click.option(
    "--external-data",
    default="auto",
    show_default=True,
    metavar="auto|none|FILE",
    help="Where OUT's weights go: auto keeps IN's layout (external weights go to OUT.data), "
    "none writes them into OUT, FILE names the external-data file beside OUT.",
)
@click.option(
    "--keep-contrib",
    is_flag=True,
    help="Leave com.microsoft QuantizeLinear/DequantizeLinear unchanged (listed).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show what would change; write nothing (with --validate: validate the result in memory).",
)
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@DIM_OPTION
@VAL_RANGE_OPTION
@SEED_OPTION
@ITERATIONS_OPTION
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the validation as one self-contained HTML page (charts, tables; opens "
    "offline). With --validate; replaced only with --force.",
)
@JSON_OPTION
@errors_are_one_line
def convert(
    model_in: Path,
    model_out: Path | None,
    static: bool,
    validate_result: bool,
    backend: str | None,
    arithmetic: str | None,
    external_data: str,
    keep_contrib: bool,
    dry_run: bool,
    force: bool,
    dims: tuple[tuple[str, int], ...],
    val_ranges: tuple[tuple[str, tuple[float, float]], ...],
    seed: int,
    iterations: int,
    report_path: Path | None,
    as_json: bool,
) -> None:
    """Rewrite IN's Q/DQ nodes into quantgraph ops and write OUT (atomically).

    IN is never modified. Nodes the spec cannot express (int32 bias dequantize, int16, blocked
    QuantizeLinear, ...) are kept and listed with the reason. --backend, --arithmetic, --dim,
    --val-range, --seed and --iterations are --validate's options.
    """
    from .converter import convert as run_convert
    from .ir.model_files import ModelLike, has_external_data

    if model_out is None and not dry_run:
        raise click.UsageError("OUT is required unless --dry-run is given")
    if not validate_result:
        refuse_given(VALIDATE_OPTIONS, "only with --validate")
    bound = bound_dims(dims)  # a bad --dim or --val-range fails before anything is written
    ranges = bound_ranges(val_ranges)
    if model_out is not None and not dry_run:
        check_output(model_out, force=force, protect=(model_in,), external_data=external_data)
    with Bar("rewriting Q/DQ nodes", quiet=as_json) as progress:
        result = run_convert(model_in, static=static, contrib=not keep_contrib, progress=progress)
    payload: dict[str, Any] = result.report.to_dict()
    validation = None
    if validate_result and not dry_run:  # the model's word on --dim/--val-range, before writing
        from .validation import check_input_options

        check_input_options(result.original(), dims=bound, val_ranges=ranges)
    if not dry_run:
        assert model_out is not None
        result.save(model_out, external_data=external_data, force=force)
        payload["output"] = str(model_out)
    if validate_result:
        from .validation import validate as run_validate

        quiet_onnxruntime()
        # What is in memory, unless its weights live on disk (then OUT beside them; under
        # --dry-run the model, whose weights are read from IN's files).
        rewritten: ModelLike = result.proto
        if has_external_data(result.model):
            rewritten = result.model if dry_run or model_out is None else model_out
        with Status("validating", quiet=as_json) as status:
            try:
                validation = run_validate(
                    result.original(),
                    rewritten,
                    backend=backend,
                    arithmetic=arithmetic,
                    seed=seed,
                    dims=bound,
                    val_ranges=ranges,
                    iterations=iterations,
                    progress=status.validation,
                )
            except Exception as error:
                if dry_run or model_out is None:
                    raise
                raise validation_failed(error, status.stage, model_in, model_out) from error
        payload["validation"] = validation.to_dict()
        if report_path is not None:
            from .validation.html_page import write_page

            write_page(
                report_path,
                validation,
                model_in,
                model_out or model_in,
                force=force,
                conversion=result.report,
            )
    if as_json:
        print_json(payload)
    else:
        print_conversion(result.report, dry_run, model_out)
        if validation is not None:
            print_validation(validation)
        if report_path is not None and validation is not None:
            click.echo(f"wrote {report_path}")
    if validation is not None and not validation.agree:
        if not as_json:
            click.echo(f"{model_out} was written and is kept, although the models disagree")
        sys.exit(EXIT_DISAGREE)


@main.command()
@click.argument("model_in", metavar="IN", type=click.Path(path_type=Path))
@click.argument("model_out", metavar="OUT", type=click.Path(path_type=Path))
@click.option(
    "--external-data",
    default="auto",
    show_default=True,
    metavar="auto|none|FILE",
    help="Where OUT's weights go: auto keeps IN's layout (external weights go to OUT.data), "
    "none writes them into OUT, FILE names the external-data file beside OUT.",
)
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Write OUT even when some quantgraph ops cannot be lowered (they stay, listed); "
    "without it that is an error and nothing is written.",
)
@JSON_OPTION
@errors_are_one_line
def lower(
    model_in: Path, model_out: Path, external_data: str, force: bool, allow_partial: bool,
    as_json: bool,
) -> None:  # fmt: skip
    """Rewrite quantgraph ops in IN back into QuantizeLinear/DequantizeLinear (com.microsoft's
    where IN's opset has no ONNX form, e.g. per-axis below opset 13).

    The round trip IN -> convert -> lower runs identically to the original at ORT_DISABLE_ALL.
    """
    from .converter import lower as run_lower

    check_output(model_out, force=force, protect=(model_in,), external_data=external_data)
    result = run_lower(model_in, allow_partial=allow_partial)
    result.save(model_out, external_data=external_data, force=force)
    payload: dict[str, Any] = {**result.report.to_dict(), "output": str(model_out)}
    if as_json:
        print_json(payload)
    else:
        print_conversion(result.report, False, model_out)


@main.command()
@click.argument("original", type=click.Path(path_type=Path))
@click.argument("rewritten", type=click.Path(path_type=Path))
@click.option(
    "--inputs",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help=f"{INPUTS_HELP}, or a directory of them; repeatable: each file is one sample "
    "(default: generated from --seed).",
)
@BACKEND_OPTION
@ARITHMETIC_OPTION
@SEED_OPTION
@ITERATIONS_OPTION
@DIM_OPTION
@VAL_RANGE_OPTION
@click.option(
    "--intermediate",
    is_flag=True,
    help="Also compare every tensor both models compute under one name and report the first "
    "node whose output differs.",
)
@click.option(
    "--optimized",
    is_flag=True,
    help="Also compare against the original at ORT_ENABLE_ALL (fused integer kernels; not "
    "expected to be exact: judged by --atol/--rtol, not part of the verdict).",
)
@click.option(
    "--atol",
    type=float,
    default=0.0,
    show_default=True,
    help="Absolute tolerance (--optimized; and the verdict when the rewritten side computes "
    "oneDNN's arithmetic).",
)
@click.option(
    "--rtol", type=float, default=0.0, show_default=True, help="Relative tolerance (as --atol)."
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the validation as one self-contained HTML page (charts, tables; opens "
    "offline). Replaced only with --force.",
)
@click.option("--force", is_flag=True, help="Replace the --report page if it exists.")
@FUSION_OPTION
@JSON_OPTION
@errors_are_one_line
def validate(
    original: Path,
    rewritten: Path,
    inputs: tuple[Path, ...],
    backend: str | None,
    arithmetic: str | None,
    seed: int,
    iterations: int,
    dims: tuple[tuple[str, int], ...],
    val_ranges: tuple[tuple[str, tuple[float, float]], ...],
    intermediate: bool,
    optimized: bool,
    atol: float,
    rtol: float,
    report_path: Path | None,
    force: bool,
    fusion: str,
    as_json: bool,
) -> None:
    """Run ORIGINAL (at ORT_DISABLE_ALL) and REWRITTEN on the same inputs; compare outputs.

    Exit 0 when every output is identical, 1 when any differs, 2 on an error. With --fusion
    onnxruntime both run at ORT_ENABLE_ALL (still an exact comparison).

    \b
    Examples:
      quantgraph validate model.onnx out.onnx --iterations 5
      quantgraph validate det.onnx det_qg.onnx --dim height=640 --dim width=640
      quantgraph validate lm.onnx lm_qg.onnx --val-range input_ids:0,15
      quantgraph validate model.onnx out.onnx --inputs samples/ --intermediate --json
      quantgraph validate model.onnx out.onnx --optimized --atol 0.05
      quantgraph validate model.onnx out.onnx --intermediate --report report.html
      quantgraph validate float.onnx qdq.onnx --intermediate --report where-it-hurts.html
    """
    from .validation import validate as run_validate

    if inputs:
        refuse_given(GENERATION_OPTIONS, "only to generated inputs, not with --inputs")
    quiet_onnxruntime()
    status = Status("validate", quiet=as_json)
    report = run_validate(
        original,
        rewritten,
        inputs=list(inputs) or None,
        backend=backend,
        arithmetic=arithmetic,
        seed=seed,
        dims=bound_dims(dims),
        val_ranges=bound_ranges(val_ranges),
        iterations=iterations,
        intermediate=intermediate,
        optimized=optimized,
        atol=atol,
        rtol=rtol,
        fusion=fusion,
        progress=status.validation,
    )
    status.close()
    if report_path is not None:
        from .validation.html_page import write_page

        write_page(report_path, report, original, rewritten, force=force)
    if as_json:
        print_json(report.to_dict())
    else:
        print_validation(report)
        if report_path is not None:
            click.echo(f"wrote {report_path}")
    sys.exit(EXIT_OK if report.agree else EXIT_DISAGREE)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--inputs",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=f"{INPUTS_HELP}: one sample (validate takes several; default: generated from --seed).",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    help="Write the outputs to this .npz (never over MODEL or --inputs).",
)
@click.option("--force", is_flag=True, help="Replace --output if it exists.")
@BACKEND_OPTION
@ARITHMETIC_OPTION
@SEED_OPTION
@DIM_OPTION
@VAL_RANGE_OPTION
@FUSION_OPTION
@JSON_OPTION
@errors_are_one_line
def run(
    model: Path,
    inputs: Path | None,
    output: Path | None,
    backend: str | None,
    arithmetic: str | None,
    seed: int,
    dims: tuple[tuple[str, int], ...],
    val_ranges: tuple[tuple[str, tuple[float, float]], ...],
    fusion: str,
    as_json: bool,
    force: bool,
) -> None:
    """Run MODEL (which may use quantgraph ops) in onnxruntime and summarize its outputs."""
    from .runtime.session import InferenceSession
    from .validation import load_inputs, make_inputs

    if inputs:
        refuse_given(GENERATION_OPTIONS, "only to generated inputs, not with --inputs")
    quiet_onnxruntime()
    bound, ranges = bound_dims(dims), bound_ranges(val_ranges)
    inputs_and_model = (model, *([inputs] if inputs else []))
    if output is not None:
        check_output(output, force=force, protect=inputs_and_model, role="--output")
    session = InferenceSession(model, backend, arithmetic=arithmetic, fusion=fusion)
    feeds = (
        load_inputs(inputs, model)
        if inputs
        else make_inputs(model, seed=seed, dims=bound, val_ranges=ranges)
    )
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feeds)
    if output is not None:
        from .ir.output_files import write_npz

        arrays = dict(zip(names, results, strict=True))
        write_npz(output, arrays, force=force, protect=inputs_and_model, role="--output")
    summary = [describe(name, value) for name, value in zip(names, results, strict=True)]
    if as_json:
        print_json(
            {
                "backend": session.backend,
                "arithmetic": session.arithmetic,
                "onednn": session.onednn_version,
                "fusion_plan": session.fusion_plan.to_dict(),
                "outputs": summary,
                "output_file": str(output) if output else None,
            }
        )
    else:
        engine = f", {session.onednn_version}" if session.onednn_version else ""
        click.echo(f"backend: {session.backend} ({session.arithmetic} arithmetic{engine})")
        if fusion != "none":
            print_plan(session.fusion_plan)
        for item in summary:
            click.echo(
                f"  {item['name']}: {item['dtype']}{item['shape']} "
                f"min {item['min']} max {item['max']}"
            )


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--static", is_flag=True, help="Plan as `convert --static` would.")
@BACKEND_OPTION
@ARITHMETIC_OPTION
@click.option(
    "--keep-contrib",
    is_flag=True,
    help="Leave com.microsoft QuantizeLinear/DequantizeLinear unchanged (listed).",
)
@FUSION_OPTION
@JSON_OPTION
@errors_are_one_line
def inspect(
    model: Path,
    static: bool,
    keep_contrib: bool,
    backend: str | None,
    arithmetic: str | None,
    fusion: str,
    as_json: bool,
) -> None:
    """List MODEL's Q/DQ nodes: what would be rewritten into what, and what not and why;
    name quantized nodes of other formats (QOperator, MatMulNBits, ...) and what to do.

    With --backend, also try every spec op of the result alone on that backend and say which
    ones it runs (e.g. --backend onednn: which nodes oneDNN refuses, and why). With --fusion,
    also the fusion plan a session would make: each unit, its nodes and kernel, and why each
    other spec op runs alone.
    """
    from .converter import convert as run_convert

    result = run_convert(model, static=static, contrib=not keep_contrib, check=False)
    payload: dict[str, Any] = result.report.to_dict()
    support = None
    if backend is not None:
        from .runtime.support import node_support

        quiet_onnxruntime()
        support = node_support(result.model, backend, arithmetic)
        payload["backend_support"] = {
            "backend": backend,
            "onednn": _engine(backend),
            "nodes": [s.to_dict() for s in support],
        }
    plan = None
    if fusion != "none":
        from .runtime.session import InferenceSession

        quiet_onnxruntime()
        plan = InferenceSession(result.model, backend, arithmetic=arithmetic, fusion=fusion)
        payload["fusion_plan"] = plan.fusion_plan.to_dict()
    if as_json:
        print_json(payload)
        return
    print_conversion(result.report, True, None)
    if support is not None:
        print_support(backend or "", _engine(backend), support)
    if plan is not None:
        print_plan(plan.fusion_plan)


def _engine(backend: str | None) -> str | None:
    if backend is None:
        return None
    from .backends import get

    return get(backend).engine_version()


main.add_command(bench)


def console_main() -> None:
    """The console script: ``main`` in a process that ends with it."""
    install_interrupt_handler()
    gc.disable()
    try:
        main()
    except Interrupted:  # raised outside a command (while click parses)
        exit_interrupted()
    finally:
        # Leave the graph's reference cycles to the OS: the interpreter's final collection
        # would walk every IR object of a big model (1.4 s for 100k nodes) just to exit.
        gc.freeze()


if __name__ == "__main__":
    console_main()
