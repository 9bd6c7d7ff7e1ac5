"""quantgraph lower: quantgraph ops back into QuantizeLinear/DequantizeLinear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .args import OutputArgs, parsed
from .args.output import EXTERNAL_DATA_OPTION, force_option
from .process import errors_are_one_line
from .render_json import JSON_OPTION, print_json
from .render_text import VERBOSE_OPTION, print_conversion


@click.command()
@click.argument("model_in", metavar="IN", type=click.Path(path_type=Path))
@click.argument("model_out", metavar="OUT", type=click.Path(path_type=Path))
@EXTERNAL_DATA_OPTION
@force_option("OUT")
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Write OUT even when some quantgraph ops cannot be lowered (they stay, listed); "
    "without it that is an error and nothing is written.",
)
@click.option(
    "--to-qdq",
    is_flag=True,
    help="Write converted MatMulNBits as blocked DequantizeLinear -> MatMul (its Q/DQ form, "
    "opset 21) instead of giving the MatMulNBits back.",
)
@VERBOSE_OPTION
@JSON_OPTION
@errors_are_one_line
@parsed(out=OutputArgs)
def lower(
    model_in: Path,
    model_out: Path,
    allow_partial: bool,
    to_qdq: bool,
    verbose: bool,
    as_json: bool,
    out: OutputArgs,
) -> None:
    """Rewrite quantgraph ops in IN back into QuantizeLinear/DequantizeLinear (com.microsoft's
    where IN's opset has no ONNX form, e.g. per-axis below opset 13).

    A converted MatMulNBits goes back to MatMulNBits with the same bytes (--to-qdq: its Q/DQ
    form). The round trip IN -> convert -> lower runs identically to the original at
    ORT_DISABLE_ALL.
    """
    from ..converter import lower as run_lower

    out.check(model_out, protect=(model_in,))
    result = run_lower(model_in, allow_partial=allow_partial, to_qdq=to_qdq)
    result.save(model_out, external_data=out.external_data, force=out.force)
    payload: dict[str, Any] = {**result.report.to_dict(), "output": str(model_out)}
    if as_json:
        print_json(payload)
    else:
        print_conversion(result.report, False, model_out, lowering=True, verbose=verbose)
