"""The shape of a backend: everything a session asks of the kernels that run the spec ops.

Each backend is one :class:`Backend` object in the registry (:func:`quantgraph.backends.get`);
code outside ``quantgraph/backends/`` never branches on a backend's name, it asks the object:
whether it can run here (:meth:`Backend.available`, an :class:`Unavailable` with the install
hint), which arithmetics it computes, how it registers on ``SessionOptions``, how it prepares a
model, which engine and version run the ops, and what it does around a run.

Fusion engines (``fusion="onnxruntime"`` today, ``fusion="onednn"`` next) plug into the same
shape: an engine has a name and a registry entry, says why it cannot run here with an
:class:`Unavailable` (oneDNN not installed, its library not built), registers its kernels in
:meth:`~Backend.register`, rewrites the units it takes over in :meth:`~Backend.prepare` (keeping
the :class:`~quantgraph.fusion.FusionPlan` as its result), names its build in
:meth:`~Backend.engine_version`, and uses :meth:`~Backend.before_run` /
:meth:`~Backend.after_run` for what it must do around each run (raise errors its kernels
recorded; capture and restore file descriptor 2 around a library that writes to it). A session
then holds one backend and one fusion engine and calls both through these methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from ..errors import BackendError

if TYPE_CHECKING:  # onnxruntime loads when a session is made, not when the CLI parses options
    import onnx_ir as ir
    import onnxruntime as ort

Arithmetic = Literal["onnx", "onednn"]
# Each arithmetic and what it computes where the spec leaves rounding open (help texts say it).
ARITHMETIC_SUMMARIES: dict[Arithmetic, str] = {
    "onnx": "bit-exact with onnxruntime's QuantizeLinear",
    "onednn": "oneDNN's rounding, x * (1/s) + zp rounded once, float8 unsaturated",
}
ARITHMETICS: tuple[Arithmetic, ...] = tuple(ARITHMETIC_SUMMARIES)


@dataclass(frozen=True)
class Unavailable:
    """Why a backend cannot run here: ``reason`` (what is missing, e.g. ``oneDNN is not
    installed``), ``hint`` (what to do: the command that installs or builds it, the variable to
    set) and ``message``, the one line a :class:`BackendUnavailable` says."""

    backend: str
    reason: str
    hint: str
    message: str

    def __str__(self) -> str:
        return self.message


class BackendUnavailable(BackendError):
    """The backend itself cannot run in this installation (not built, not installed, a variable
    naming no file): a property of the machine, never of a model or a node."""

    def __init__(self, unavailable: Unavailable) -> None:
        super().__init__(unavailable.message)
        self.unavailable = unavailable


class LibraryMissing(BackendError):
    """A library a backend loads is not there: ``reason`` says which and why, ``hint`` what to
    do; ``variable`` is the environment variable that named a missing file, if one did."""

    def __init__(
        self, reason: str, hint: str = "", *, separator: str = "; ", variable: str | None = None
    ) -> None:
        super().__init__(f"{reason}{separator}{hint}" if hint else reason)
        self.reason = reason
        self.hint = hint
        self.variable = variable


class Backend(ABC):
    """One way to run the spec ops in onnxruntime. Subclasses set the class attributes and
    implement :meth:`available` and :meth:`register`; the other methods default to nothing."""

    name: ClassVar[str]
    # The arithmetics it computes (see quantgraph.backends), its natural one first.
    arithmetics: ClassVar[tuple[Arithmetic, ...]]
    # Why it refuses another arithmetic than its own (one line).
    arithmetic_refusal: ClassVar[str] = ""
    # What computes the ops, in words.
    engine: ClassVar[str]
    # Whether a session may pick it when the caller names no backend.
    by_default: ClassVar[bool] = True
    # Whether prepare() may change a model (the session then works on a copy).
    prepares: ClassVar[bool] = False
    # Whether register() also registers the OneDnnPartition op of fusion "onednn" (the onednn
    # backend's library holds both); else the session registers it beside the backend.
    registers_partitions: ClassVar[bool] = False

    @abstractmethod
    def available(self) -> Unavailable | None:
        """Why it cannot run here; None when it can. Loads nothing."""

    def require(self) -> Backend:
        """Itself, when it can run here; else :class:`BackendUnavailable`."""
        missing = self.available()
        if missing is not None:
            raise BackendUnavailable(missing)
        return self

    def requested(self) -> bool:
        """Whether the environment asks for it (a variable naming its library is set)."""
        return False

    def arithmetic(self, wanted: Arithmetic | None) -> Arithmetic:
        """The arithmetic a session computes when ``wanted`` (a known one) is asked for."""
        if wanted is None:
            return self.arithmetics[0]
        if wanted not in self.arithmetics:
            raise BackendError(self.arithmetic_refusal)
        return wanted

    @abstractmethod
    def register(self, options: ort.SessionOptions, arithmetic: Arithmetic) -> None:
        """Register its kernels of domain com.quantgraph, computing ``arithmetic``, in
        ``options`` (never two backends in one options: one domain, one library)."""

    def configure(self, options: ort.SessionOptions) -> None:
        """What a :class:`~quantgraph.InferenceSession` on it needs of ``options`` beyond the
        kernels."""
        return None

    def prepare(self, model: ir.Model) -> bool:
        """Put ``model`` in the form its kernels run (in place); whether it changed. Errors
        are the spec's :class:`~quantgraph.spec.SpecError` or a :class:`BackendError` naming
        the node."""
        return False

    def engine_version(self) -> str | None:
        """Which build of an outside engine runs the ops (e.g. ``oneDNN v3.2.0 (...)``); None
        when they are quantgraph's own code. May load the engine."""
        return None

    def before_run(self) -> None:
        """Called before each run of a session on it."""
        return None

    def after_run(self) -> None:
        """Called after each run that returned (e.g. raise what its kernels recorded)."""
        return None


__all__ = [
    "ARITHMETICS",
    "ARITHMETIC_SUMMARIES",
    "Arithmetic",
    "Backend",
    "BackendUnavailable",
    "LibraryMissing",
    "Unavailable",
]
