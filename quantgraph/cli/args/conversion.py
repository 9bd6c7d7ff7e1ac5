"""Conversion: how convert rewrites Q/DQ nodes (inspect plans the same way)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from .base import ArgGroup, group_option

OWNER = "ConversionArgs"
F = TypeVar("F", bound=Callable[..., Any])


def static_option(planning: bool) -> Callable[[F], F]:
    """--static: convert emits static ops; inspect (``planning``) plans as convert would."""
    text = (
        "Plan as `convert --static` would."
        if planning
        else "Emit static Quantize/Dequantize (scales/zps attributes) where scale and zero point "
        "are constants."
    )
    return group_option(OWNER, "--static", is_flag=True, help=text)


KEEP_CONTRIB_OPTION = group_option(
    OWNER,
    "--keep-contrib",
    is_flag=True,
    help="Leave com.microsoft QuantizeLinear/DequantizeLinear unchanged (listed).",
)


@dataclasses.dataclass(frozen=True)
class ConversionArgs(ArgGroup):
    static: bool = False
    keep_contrib: bool = False

    @property
    def contrib(self) -> bool:
        """Rewrite com.microsoft's Q/DQ too (converter's ``contrib``)."""
        return not self.keep_contrib
