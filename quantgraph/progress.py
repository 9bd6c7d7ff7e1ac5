"""Progress of long work, shown on a terminal only: on stderr, when stderr is a TTY and the
command does not print JSON. Piped, redirected or under ``--json`` nothing is shown (the
callbacks are then None and the work does not even format the text)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

import click


def shown(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether progress goes to ``stream`` (default stderr): a terminal, and not ``quiet``."""
    stream = stream if stream is not None else sys.stderr
    try:
        return not quiet and stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Bar:
    """A progress bar for counted work (``callback(done, total)``)."""

    def __init__(self, label: str, *, quiet: bool) -> None:
        self.label = label
        self.enabled = shown(quiet)
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


# What a validation stage runs besides "the original" (quantgraph.validation.run).
STAGE_DETAIL = {
    "optimized": " at ORT_ENABLE_ALL",
    "spread": " with rounding noise (the bound)",
    "as run": " as onnxruntime runs it",
}


class Status:
    """One status line rewritten in place (``label: text``), erased when the work ends.

    ``stage`` is the last stage reported, kept even when nothing is shown (a caller can say
    which step failed)."""

    def __init__(self, label: str, *, quiet: bool, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = shown(quiet, self.stream)
        self.stage: str | None = None
        self._dirty = False

    def __enter__(self) -> Status:
        return self

    def validation(self, stage: str, done: int, total: int) -> None:
        """The callback of :func:`quantgraph.validate`: stage ``original``, ``rewritten``,
        ``optimized``, ``spread`` or ``as run``; ``done`` 0 while the model's session is being
        made. A decoder's generation: ``generation original`` / ``generation rewritten``,
        ``done`` the step."""
        self.stage = stage
        if not self.enabled:
            return
        if stage.startswith("generation "):
            side = "the original" if stage.endswith("original") else "the rewritten model"
            self.show(f"generating with {side}: step {done}/{total}")
            return
        model = "the original" if stage != "rewritten" else "the rewritten model"
        model += STAGE_DETAIL.get(stage, "")
        text = f"loading {model}" if done == 0 else f"running {model}: sample {done}/{total}"
        self.show(text)

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        self.stream.write(f"\r\033[K{self.label}: {text}")
        self.stream.flush()
        if not self._dirty:
            _shown.append(self)
        self._dirty = True

    def close(self) -> None:
        """Erase the line (errors and results then start at the line's beginning)."""
        if self._dirty:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._dirty = False
            _shown.remove(self)

    def __exit__(self, *exc: object) -> None:
        self.close()


_shown: list[Status] = []  # status lines on the terminal now


def erase() -> None:
    """Erase every status line still shown (before an error message is printed)."""
    for status in list(_shown):
        status.close()
