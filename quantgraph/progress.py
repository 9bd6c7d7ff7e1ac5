"""Progress of long work, on stderr, never under ``--json``.

On a terminal: one status line rewritten in place (``label: what it does now``), with the
seconds the step has taken once it has run :data:`DELAY` seconds (a clock thread keeps them
moving through a step that reports nothing else, such as fusion "auto"'s measurements), erased
when the work ends. Piped or redirected (a log, CI): one line per stage that runs longer than
:data:`DELAY` seconds, written once it has, so a quick command prints nothing and a long one
says what it is doing without a flood of rewritten lines. Under ``--json`` nothing at all.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

import click

DELAY = 2.0  # seconds a step runs before its time is shown (terminal) or its line written (piped)
TICK = 0.5  # how often the clock thread looks
TERMINAL, LINES, OFF = "terminal", "lines", "off"


def shown(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether progress goes to ``stream`` (default stderr) as a live line: a terminal, and
    not ``quiet``."""
    return mode(quiet, stream) == TERMINAL


def mode(quiet: bool, stream: TextIO | None = None) -> str:
    """How progress reaches ``stream`` (default stderr): :data:`TERMINAL` (a live line),
    :data:`LINES` (piped or redirected: a line per long stage) or :data:`OFF` (``quiet``: JSON,
    or a closed stream)."""
    stream = stream if stream is not None else sys.stderr
    if quiet:
        return OFF
    try:
        return TERMINAL if stream.isatty() else LINES
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return OFF


class Status:
    """One command's progress (see the module doc): :meth:`step` says what it does now, under
    a stage key (a new key starts a new stage).

    ``stage`` is the last stage :meth:`validation` reported, kept even when nothing is shown
    (a caller can say which step failed)."""

    def __init__(
        self,
        label: str,
        *,
        quiet: bool,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        ticking: bool = True,
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.mode = mode(quiet, self.stream)
        self.enabled = self.mode == TERMINAL
        self.stage: str | None = None
        self._clock = clock
        self._ticking = ticking and self.mode != OFF
        self._key: str | None = None
        self._text = ""
        self._began = 0.0
        self._written = False  # this stage's line (piped)
        self._dirty = False  # a live line is on the terminal
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Status:
        return self

    def validation(self, stage: str, done: int, total: int) -> None:
        """The callback of :func:`quantgraph.validate`: ``stage`` ``original``, ``rewritten``,
        ``optimized``, ``reference``, ``spread`` or ``as run`` (``done`` 0 while the model's
        session is being made); ``generation original`` / ``generation rewritten`` (``done``
        the step of a decoder's generation);
        ``search`` (``done``: the plan of inputs tried); ``nodes`` (each node's own error);
        ``sensitivity`` (rerun ``done`` of ``total`` with a tensor kept in float starts)."""
        self.stage = stage
        if self.mode == OFF:
            return
        if stage == "search":
            self.step(stage, f"searching inputs the original accepts: plan {done}")
            return
        if stage == "nodes":
            self.step(stage, "measuring each quantized node's own error")
            return
        if stage == "sensitivity":
            self.step(stage, f"rerun {done}/{total} with a place kept in float (--sensitivity)")
            return
        if stage.startswith("generation "):
            side = "the original" if stage.endswith("original") else "the rewritten model"
            self.step(stage, f"generating with {side}: step {done}/{total}")
            return
        model = {
            "rewritten": "the rewritten model",
            "optimized": "the original at ORT_ENABLE_ALL",
            "reference": "the original in oneDNN's arithmetic",
            "spread": "the original with rounding noise (the bound)",
            "as run": "the original as onnxruntime runs it",
        }.get(stage, "the original")
        if done == 0:
            self.step(f"{stage}:load", f"loading {model}")
        else:
            self.step(f"{stage}:run", f"running {model}: sample {done}/{total}")

    def step(self, key: str, text: str) -> None:
        """Now doing ``text``, in the stage ``key`` (a new key restarts the clock)."""
        if self.mode == OFF:
            return
        with self._lock:
            if key != self._key:
                self._key, self._began, self._written = key, self._clock(), False
            self._text = text
            self._render()
        if self._ticking and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run_clock, daemon=True)
            self._thread.start()
            _clocks.append(self)

    def show(self, text: str) -> None:
        """:meth:`step` with the text as its own stage."""
        self.step(text, text)

    def tick(self) -> None:
        """What the clock thread does every :data:`TICK` seconds: the live line's seconds, or
        a long stage's line when piped."""
        with self._lock:
            if self._key is not None:
                self._render()

    def _render(self) -> None:
        elapsed = self._clock() - self._began
        if self.mode == TERMINAL:
            seconds = f" ({elapsed:.0f} s)" if elapsed >= DELAY else ""
            self.stream.write(f"\r\033[K{self.label}: {self._text}{seconds}")
            self.stream.flush()
            if not self._dirty:
                _shown.append(self)
            self._dirty = True
        elif self.mode == LINES and not self._written and elapsed >= DELAY:
            self.stream.write(f"{self.label}: {self._text} ...\n")
            self.stream.flush()
            self._written = True

    def _run_clock(self) -> None:
        while not self._stop.wait(TICK):
            if sys.is_finalizing():
                return
            self.tick()

    def close(self) -> None:
        """Stop the clock and erase the line (errors and results then start at the line's
        beginning); the next :meth:`step` starts again."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            if thread is not threading.current_thread():
                thread.join()
            _clocks.remove(self)
        with self._lock:
            self._key = None
            if self._dirty:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self._dirty = False
                _shown.remove(self)

    def __exit__(self, *exc: object) -> None:
        self.close()


class Bar:
    """A progress bar for counted work (``callback(done, total)``) on a terminal; piped, the
    stage's one line once it has run :data:`DELAY` seconds (``command``: its label)."""

    def __init__(self, label: str, *, quiet: bool, command: str = "quantgraph") -> None:
        self.label = label
        self.enabled = shown(quiet)
        self._bar: Any = None
        self._lines = Status(command, quiet=quiet) if mode(quiet) == LINES else None

    def __enter__(self) -> Callable[[int, int], None] | None:
        if self.enabled:
            return self.update
        return self._counted if self._lines is not None else None

    def update(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)

    def _counted(self, done: int, total: int) -> None:
        assert self._lines is not None
        self._lines.step(self.label, f"{self.label}: {done}/{total}")

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
        if self._lines is not None:
            self._lines.close()


_shown: list[Status] = []  # status lines on the terminal now
_clocks: list[Status] = []  # statuses whose clock thread runs


def erase() -> None:
    """Erase every status line still shown and stop every clock (before an error message or a
    warning is printed: nothing of progress writes after it)."""
    for status in list(dict.fromkeys([*_shown, *_clocks])):
        status.close()
