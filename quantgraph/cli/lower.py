"""quantgraph lower: quantgraph ops back into QuantizeLinear/DequantizeLinear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..writing import check_output
from .common import errors_are_one_line, print_json
from .options import JSON_OPTION
from .render_text import print_conversion


@click.command()
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
    from ..converter import lower as run_lower

    check_output(model_out, force=force, protect=(model_in,), external_data=external_data)
    result = run_lower(model_in, allow_partial=allow_partial)
    result.save(model_out, external_data=external_data, force=force)
    payload: dict[str, Any] = {**result.report.to_dict(), "output": str(model_out)}
    if as_json:
        print_json(payload)
    else:
        print_conversion(result.report, False, model_out)
