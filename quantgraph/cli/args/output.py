"""Output files: where a command writes (--output, --report), whether it may replace a file
(--force) and where a model's weights go (--external-data). Every file is written as
quantgraph.ir.output_files says: never over an input, replaced only with --force."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from .base import ArgGroup, group_option

OWNER = "OutputArgs"
F = TypeVar("F", bound=Callable[..., Any])
_FORCE_HELP = {
    "OUT": "Replace OUT if it exists.",
    "--output": "Replace --output if it exists.",
    "--report": "Replace the --report page if it exists.",
}
_REPORT_HELP = (
    "Also write the validation as one self-contained HTML page (charts, tables; opens offline)."
)


def force_option(replaces: Literal["OUT", "--output", "--report"]) -> Callable[[F], F]:
    """--force, saying which file it lets the command replace."""
    return group_option(OWNER, "--force", is_flag=True, help=_FORCE_HELP[replaces])


def report_option(with_validate: bool) -> Callable[[F], F]:
    """--report: the HTML page (convert writes it only with --validate)."""
    rule = "With --validate; replaced only with --force." if with_validate else (
        "Replaced only with --force."
    )  # fmt: skip
    return group_option(
        OWNER,
        "--report",
        "report_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"{_REPORT_HELP} {rule}",
    )


EXTERNAL_DATA_OPTION = group_option(
    OWNER,
    "--external-data",
    default="auto",
    show_default=True,
    metavar="auto|none|FILE",
    help="Where OUT's weights go: auto keeps IN's layout (external weights go to OUT.data), "
    "none writes them into OUT, FILE names the external-data file beside OUT.",
)
OUTPUT_OPTION = group_option(
    OWNER,
    "--output",
    type=click.Path(path_type=Path),
    help="Write the outputs to this .npz (never over MODEL or --inputs).",
)


@dataclasses.dataclass(frozen=True)
class OutputArgs(ArgGroup):
    output: Path | None = None
    force: bool = False
    external_data: str = "auto"
    report_path: Path | None = None

    def check(self, path: Path, protect: Iterable[Path], role: str = "OUT") -> None:
        """Refuse ``path`` before any work (exists without --force, an input, a bad
        --external-data; quantgraph.ir.output_files.check_output)."""
        from ...ir.output_files import check_output

        check_output(
            path, force=self.force, protect=protect, external_data=self.external_data, role=role
        )

    def check_report(self, protect: Iterable[Path], out: Path | None = None) -> None:
        """Refuse --report before any work as :meth:`check` refuses OUT; nor may it be ``out``
        (OUT, written by the same command, need not exist yet)."""
        from ...errors import ModelError
        from ...ir.output_files import check_output

        if self.report_path is None:
            return
        if out is not None and self.report_path.resolve() == out.resolve():
            raise ModelError(
                f"{self.report_path}: --report is OUT; give the page a name of its own"
            )
        check_output(self.report_path, force=self.force, protect=protect, role="--report")
