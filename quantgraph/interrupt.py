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


# While an import runs, Interrupted waits: raised inside an extension module's initialisation
# it can crash the process instead of unwinding it (SIGSEGV and SIGABRT, Ctrl-C 0.5 s into
# `quantgraph validate` on a loaded machine, 3 in 160 runs: protobuf's upb and numpy were being
# imported). The handler then looks again every _RETRY_SECONDS (SIGALRM) until no import is
# running, and raises there.
_RETRY_SECONDS = 0.02
_RETRY = getattr(signal, "SIGALRM", None)  # POSIX; elsewhere Interrupted is raised at once


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _raise_when_no_import_runs(signum: int, frame: FrameType | None) -> None:
    if _RETRY is not None and _importing(frame):
        signal.signal(_RETRY, _raise_when_no_import_runs)
        signal.setitimer(signal.ITIMER_REAL, _RETRY_SECONDS)
        return
    raise Interrupted


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _received:  # a second Ctrl-C while cleaning up: let the cleanup finish
        return
    _received.append(signum)
    _raise_when_no_import_runs(signum, frame)


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
