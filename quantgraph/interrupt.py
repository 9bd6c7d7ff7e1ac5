"""Ctrl-C: exit 130 with one line, leaving nothing behind (no click here: the console script
installs the handler before importing anything heavy).

The handler remembers the interruption and raises :class:`Interrupted`, a ``BaseException``
click does not turn into "Aborted!" (exit 1, the code of "models disagree"); every ``finally``
still runs on its way up, so temporary files go (:mod:`quantgraph.ir.output_files`). When it lands
inside an extension module (onnxruntime's start-up then says "initialization failed", a Python
kernel records it as a kernel error) another error comes out: :func:`interrupted` still says
what happened.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import NoReturn

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a process Ctrl-C stopped
_received: list[int] = []


class Interrupted(BaseException):
    """SIGINT arrived (raised by the handler :func:`install_interrupt_handler` sets)."""


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _received:  # a second Ctrl-C while cleaning up: let the cleanup finish
        return
    _received.append(signum)
    raise Interrupted


def install_interrupt_handler() -> None:
    signal.signal(signal.SIGINT, _on_sigint)


def note_interrupt() -> None:
    """Record an interruption that arrived as a KeyboardInterrupt (no handler installed)."""
    _received.append(signal.SIGINT)


def interrupted() -> bool:
    """Whether SIGINT arrived in this process (whatever exception it became)."""
    return bool(_received)


def exit_interrupted() -> NoReturn:
    progress = sys.modules.get("quantgraph.progress")
    if progress is not None:
        progress.erase()  # a status line on the terminal
    sys.stderr.write("quantgraph: interrupted (nothing half-written was left behind)\n")
    sys.stderr.flush()
    sys.exit(EXIT_INTERRUPTED)
