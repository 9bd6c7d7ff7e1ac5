"""quantgraph command line: convert, lower, validate, run, inspect, bench.

Only this module knows about terminals, exit codes and JSON printing.
Exit codes: 0 success (validate: the models agree), 1 validate found a disagreement,
2 an error (one line on stderr; --debug shows the traceback).
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from .cli_options import (
    ARITHMETIC_OPTION,
    BACKEND_OPTION,
    DIM_OPTION,
    ITERATIONS_OPTION,
    JSON_OPTION,
    VAL_RANGE_OPTION,
)
from .cli_text import (
    describe,
    print_conversion,
    print_support,
    print_validation,
)
from .errors import one_line

EXIT_OK, EXIT_DISAGREE, EXIT_ERROR = 0, 1, 2
F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str) -> NoReturn:
    click.echo(f"quantgraph: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _errors_are_one_line(function: F) -> F:
    """Turn every expected failure into one line on stderr and exit code 2."""
    import functools

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = click.get_current_context().find_root().params.get("debug", False)
        try:
            return function(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except Exception as error:
            if debug:
                raise
            _fail(one_line(error))

    return wrapper  # type: ignore[return-value]


def _val_ranges(values: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    from .validation import parse_val_range

    ranges = {}
    for item in values:
        try:
            name, bounds = parse_val_range(item)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--val-range") from None
        ranges[name] = bounds
    return ranges


def _quiet_onnxruntime() -> None:
    """onnxruntime's own log lines never reach the terminal: its errors arrive as exceptions,
    which become quantgraph's one-line errors."""
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)


def _dims(values: tuple[str, ...]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in values:
        name, sep, number = item.partition("=")
        if not sep or not number.lstrip("-").isdigit() or int(number) < 0:
            raise click.BadParameter(
                f"{item!r}: expected NAME=VALUE with VALUE >= 0", param_hint="--dim"
            )
        dims[name] = int(number)
    return dims


def _print_json(payload: object) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=False, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
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
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@DIM_OPTION
@VAL_RANGE_OPTION
@ITERATIONS_OPTION
@JSON_OPTION
@_errors_are_one_line
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
    dims: tuple[str, ...],
    val_ranges: tuple[str, ...],
    iterations: int,
    as_json: bool,
) -> None:
    """Rewrite IN's Q/DQ nodes into quantgraph ops and write OUT (atomically).

    IN is never modified. Nodes the spec cannot express (int32 bias dequantize, int16, blocked
    QuantizeLinear, ...) are kept and listed with the reason.
    """
    from .converter import convert as run_convert
    from .io import has_external_data

    if model_out is None and not dry_run:
        raise click.UsageError("OUT is required unless --dry-run is given")
    bound = _dims(dims)  # a bad --dim or --val-range fails before anything is written
    ranges = _val_ranges(val_ranges)
    if model_out is not None and not dry_run:
        _check_output(model_in, model_out, force)
    with _progress("rewriting Q/DQ nodes", quiet=as_json) as progress:
        result = run_convert(model_in, static=static, contrib=not keep_contrib, progress=progress)
    payload: dict[str, Any] = result.report.to_dict()
    validation = None
    if not dry_run:
        assert model_out is not None
        result.save(model_out, external_data=external_data)
        payload["output"] = str(model_out)
        if validate_result:
            from .validation import validate as run_validate

            _quiet_onnxruntime()
            # What is in memory, unless its weights live on disk (then OUT, beside them).
            rewritten = model_out if has_external_data(result.model) else result.proto
            validation = run_validate(
                result.original(),
                rewritten,
                backend=backend,
                arithmetic=arithmetic,
                dims=bound,
                val_ranges=ranges,
                iterations=iterations,
            )
            payload["validation"] = validation.to_dict()
    if as_json:
        _print_json(payload)
    else:
        print_conversion(result.report, dry_run, model_out)
        if validation is not None:
            print_validation(validation)
    if validation is not None and not validation.agree:
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
@_errors_are_one_line
def lower(
    model_in: Path, model_out: Path, external_data: str, force: bool, allow_partial: bool,
    as_json: bool,
) -> None:  # fmt: skip
    """Rewrite quantgraph ops in IN back into QuantizeLinear/DequantizeLinear (com.microsoft's
    where IN's opset has no ONNX form, e.g. per-axis below opset 13).

    The round trip IN -> convert -> lower runs identically to the original at ORT_DISABLE_ALL.
    """
    from .converter import lower as run_lower

    _check_output(model_in, model_out, force)
    result = run_lower(model_in, allow_partial=allow_partial)
    result.save(model_out, external_data=external_data)
    payload: dict[str, Any] = {**result.report.to_dict(), "output": str(model_out)}
    if as_json:
        _print_json(payload)
    else:
        print_conversion(result.report, False, model_out)


@main.command()
@click.argument("original", type=click.Path(path_type=Path))
@click.argument("rewritten", type=click.Path(path_type=Path))
@click.option(
    "--inputs",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="An .npz of input arrays by name, or a directory of them; repeatable: each file is "
    "one sample (default: generated from --seed).",
)
@BACKEND_OPTION
@ARITHMETIC_OPTION
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random inputs.")
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
@JSON_OPTION
@_errors_are_one_line
def validate(
    original: Path,
    rewritten: Path,
    inputs: tuple[Path, ...],
    backend: str | None,
    arithmetic: str | None,
    seed: int,
    iterations: int,
    dims: tuple[str, ...],
    val_ranges: tuple[str, ...],
    intermediate: bool,
    optimized: bool,
    atol: float,
    rtol: float,
    as_json: bool,
) -> None:
    """Run ORIGINAL (at ORT_DISABLE_ALL) and REWRITTEN on the same inputs; compare outputs.

    Exit 0 when every output is identical, 1 when any differs, 2 on an error.

    \b
    Examples:
      quantgraph validate model.onnx out.onnx --iterations 5
      quantgraph validate det.onnx det_qg.onnx --dim height=640 --dim width=640
      quantgraph validate lm.onnx lm_qg.onnx --val-range input_ids:0,15
      quantgraph validate model.onnx out.onnx --inputs samples/ --intermediate --json
      quantgraph validate model.onnx out.onnx --optimized --atol 0.05
    """
    from .validation import validate as run_validate

    _quiet_onnxruntime()
    report = run_validate(
        original,
        rewritten,
        inputs=list(inputs) or None,
        backend=backend,
        arithmetic=arithmetic,
        seed=seed,
        dims=_dims(dims),
        val_ranges=_val_ranges(val_ranges),
        iterations=iterations,
        intermediate=intermediate,
        optimized=optimized,
        atol=atol,
        rtol=rtol,
    )
    if as_json:
        _print_json(report.to_dict())
    else:
        print_validation(report)
    sys.exit(EXIT_OK if report.agree else EXIT_DISAGREE)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--inputs",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="An .npz of input arrays by name (default: random from --seed).",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the outputs to this .npz.",
)
@BACKEND_OPTION
@ARITHMETIC_OPTION
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random inputs.")
@DIM_OPTION
@VAL_RANGE_OPTION
@JSON_OPTION
@_errors_are_one_line
def run(
    model: Path,
    inputs: Path | None,
    output: Path | None,
    backend: str | None,
    arithmetic: str | None,
    seed: int,
    dims: tuple[str, ...],
    val_ranges: tuple[str, ...],
    as_json: bool,
) -> None:
    """Run MODEL (which may use quantgraph ops) in onnxruntime and summarize its outputs."""
    import numpy as np

    from .session import InferenceSession
    from .validation import load_inputs, make_inputs

    _quiet_onnxruntime()
    bound, ranges = _dims(dims), _val_ranges(val_ranges)
    session = InferenceSession(model, backend, arithmetic=arithmetic)
    feeds = (
        load_inputs(inputs)
        if inputs
        else make_inputs(model, seed=seed, dims=bound, val_ranges=ranges)
    )
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feeds)
    if output is not None:
        with open(output, "wb") as stream:  # np.savez(path) would append ".npz" to the name
            np.savez(stream, **dict(zip(names, results, strict=True)))
    summary = [describe(name, value) for name, value in zip(names, results, strict=True)]
    if as_json:
        _print_json(
            {
                "backend": session.backend,
                "arithmetic": session.arithmetic,
                "onednn": session.onednn_version,
                "outputs": summary,
                "output_file": str(output) if output else None,
            }
        )
    else:
        engine = f", {session.onednn_version}" if session.onednn_version else ""
        click.echo(f"backend: {session.backend} ({session.arithmetic} arithmetic{engine})")
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
@JSON_OPTION
@_errors_are_one_line
def inspect(
    model: Path,
    static: bool,
    keep_contrib: bool,
    backend: str | None,
    arithmetic: str | None,
    as_json: bool,
) -> None:
    """List MODEL's Q/DQ nodes: what would be rewritten into what, and what not and why;
    name quantized nodes of other formats (QOperator, MatMulNBits, ...) and what to do.

    With --backend, also try every spec op of the result alone on that backend and say which
    ones it runs (e.g. --backend onednn: which nodes oneDNN refuses, and why).
    """
    from .converter import convert as run_convert

    result = run_convert(model, static=static, contrib=not keep_contrib, check=False)
    payload: dict[str, Any] = result.report.to_dict()
    support = None
    if backend is not None:
        from .backends.support import node_support

        _quiet_onnxruntime()
        support = node_support(result.model, backend, arithmetic)
        payload["backend_support"] = {
            "backend": backend,
            "engine": _engine(backend),
            "nodes": [s.to_dict() for s in support],
        }
    if as_json:
        _print_json(payload)
        return
    print_conversion(result.report, True, None)
    if support is not None:
        print_support(backend or "", _engine(backend), support)


def _engine(backend: str | None) -> str | None:
    if backend != "onednn":
        return None
    from .backends import onednn

    return onednn.version()


@main.command()
@click.option(
    "--sizes",
    default="1000,65536,1048576,16777216",
    show_default=True,
    help="Comma-separated element counts.",
)
@click.option("--repeat", type=int, default=20, show_default=True, help="Timed runs per case.")
@click.option(
    "--columns",
    default="16,64,384",
    show_default=True,
    help="Column counts of the narrow innermost-axis per-channel layouts ([n // C, C], axis 1); "
    "empty for none.",
)
@click.option(
    "--threads",
    type=int,
    default=0,
    show_default=True,
    help="onnxruntime intra-op threads for every session (0: onnxruntime's default).",
)
@click.option(
    "--weights",
    default="4096x4096",
    show_default=True,
    help="Comma-separated KxN shapes of the 4-bit weight rows (K and N multiples of 32); empty "
    "for none.",
)
@click.option(
    "--no-spinning",
    is_flag=True,
    help="Intra-op threads sleep after a run instead of spin-waiting (onnxruntime's default).",
)
@JSON_OPTION
@_errors_are_one_line
def bench(
    sizes: str,
    repeat: int,
    columns: str,
    threads: int,
    weights: str,
    no_spinning: bool,
    as_json: bool,
) -> None:
    """Time the kernels against onnxruntime's QuantizeLinear/DequantizeLinear, plain numpy and
    np.copyto, measured in the same run."""
    from . import bench as benchmarks

    counts = tuple(int(s) for s in sizes.split(",") if s.strip())
    shapes = []
    for text in (w.strip() for w in weights.split(",") if w.strip()):
        k, _, n = text.lower().partition("x")
        if not (k.isdigit() and n.isdigit()) or int(k) % 32 or int(n) % 32:
            raise click.BadParameter(f"{text!r} is not KxN with K and N multiples of 32")
        shapes.append((int(k), int(n)))
    narrow = tuple(f"{benchmarks.NARROW_PREFIX}{int(c)}" for c in columns.split(",") if c.strip())
    progress = (
        None if as_json or not sys.stderr.isatty() else (lambda text: click.echo(text, err=True))
    )
    rows = benchmarks.run(
        sizes=counts,
        repeat=repeat,
        layouts=(*benchmarks.LAYOUTS, *narrow),
        threads=threads,
        spinning=not no_spinning,
        progress=progress,
        weights=tuple(shapes),
    )
    if as_json:
        _print_json([row.to_dict() for row in rows])
    else:
        click.echo(benchmarks.format_table(rows))


class _progress:
    """A progress bar on a terminal; nothing with --json or when stderr is not a TTY."""

    def __init__(self, label: str, *, quiet: bool) -> None:
        self.label = label
        self.enabled = not quiet and sys.stderr.isatty()
        self._bar: Any = None

    def __enter__(self) -> Callable[[int, int], None] | None:
        return self.update if self.enabled else None

    def update(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _check_output(model_in: Path, model_out: Path, force: bool) -> None:
    if model_out.resolve() == model_in.resolve():
        _fail(f"{model_out}: OUT is the input file; quantgraph never overwrites its input")
    if model_out.exists() and not force:
        _fail(f"{model_out}: already exists (use --force to replace it)")


def console_main() -> None:
    """The console script: ``main`` in a process that ends with it."""
    gc.disable()
    try:
        main()
    finally:
        # Leave the graph's reference cycles to the OS: the interpreter's final collection
        # would walk every IR object of a big model (1.4 s for 100k nodes) just to exit.
        gc.freeze()


if __name__ == "__main__":
    console_main()
