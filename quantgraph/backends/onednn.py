"""The onednn backend: the spec ops run by oneDNN itself, inside onnxruntime.

``libquantgraph_onednn.so`` (built beside the native library when oneDNN's headers are there at
build time) registers the four ops of domain ``com.quantgraph``; each call is a compiled
single-op oneDNN Graph partition on oneDNN's CPU engine, so results are what oneDNN computes
(its arithmetic, its refusals), not what ONNX computes. The library does not link oneDNN: it
binds to the ``libdnnl.so.3`` this module loads first, into the process's global scope:

- ``QUANTGRAPH_ONEDNN_LIBRARY=/path/libdnnl.so.3``: any oneDNN 3.x (e.g. PyPI's ``onednn``
  2026.1.0 = v3.13, whose sibling libraries in its ``lib/`` are loaded first as needed and whose
  OpenCL loader gets ``OCL_ICD_FILENAMES`` when unset);
- else the one ``pip install 'quantgraph[onednn]'`` installed (``onednn-cpu-gomp``, v3.2).

Two different ``libdnnl.so.3`` cannot live in one process (the first loaded wins): asking for
another one than the process has is a :class:`BackendError`. ``QUANTGRAPH_ONEDNN_KERNELS_LIBRARY``
overrides where ``libquantgraph_onednn.so`` is (``QUANTGRAPH_ONEDNN_LIB``, its earlier name, still
works).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import re
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BackendError
from .base import Arithmetic, Backend, LibraryMissing, Unavailable
from .environment import library_override

if TYPE_CHECKING:  # onnxruntime loads when a session is made, not when the registry is listed
    import onnxruntime as ort

ENV_LIBRARY = "QUANTGRAPH_ONEDNN_LIBRARY"
ENV_KERNELS = "QUANTGRAPH_ONEDNN_KERNELS_LIBRARY"
ENV_KERNELS_DEPRECATED = "QUANTGRAPH_ONEDNN_LIB"
KERNELS_NAME = "libquantgraph_onednn.so"
DNNL_SONAME = "libdnnl.so.3"
# PyPI's oneDNN runtimes, in the order they are looked for.
DISTRIBUTIONS = ("onednn-cpu-gomp", "onednn", "onednn-cpu-iomp", "onednn-cpu-tbb")

INSTALL_HINT = (
    "install oneDNN with `pip install 'quantgraph[onednn]'` (onednn-cpu-gomp, oneDNN v3.2 for "
    f"CPUs) or set {ENV_LIBRARY}=/path/to/{DNNL_SONAME} (any oneDNN 3.x)"
)
_SHARED = re.compile(r"lib[\w+-]+\.so(\.\d+)*")
_MISSING_LIBRARY = re.compile(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file")


def dnnl_path() -> Path:
    """The ``libdnnl.so.3`` the backend will load: $QUANTGRAPH_ONEDNN_LIBRARY, else the one
    from an installed oneDNN wheel."""
    override = os.environ.get(ENV_LIBRARY)
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise LibraryMissing(
                f"{ENV_LIBRARY}={override!r} is not a file",
                f"unset it or point it at a oneDNN 3.x {DNNL_SONAME}",
                variable=ENV_LIBRARY,
            )
        return path.resolve()
    for name in DISTRIBUTIONS:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in files:
            if file.name == DNNL_SONAME:
                return Path(str(file.locate())).resolve()
    raise LibraryMissing("oneDNN is not installed", INSTALL_HINT, separator=": ")


def kernels_path() -> Path:
    """quantgraph's oneDNN-backed kernel library ($QUANTGRAPH_ONEDNN_KERNELS_LIBRARY overrides
    it; $QUANTGRAPH_ONEDNN_LIB, its earlier name, too)."""
    override = library_override(ENV_KERNELS, ENV_KERNELS_DEPRECATED)
    if override:
        variable, value = override
        path = Path(value).expanduser()
        if not path.is_file():
            raise LibraryMissing(f"{variable}={value!r} is not a file", variable=variable)
        return path.resolve()
    import quantgraph

    candidates = [Path(entry) / "_native" / KERNELS_NAME for entry in quantgraph.__path__]
    for path in candidates:
        if path.is_file():
            return path.resolve()
    raise LibraryMissing(
        f"the onednn kernel library is not built (looked for {', '.join(map(str, candidates))})",
        "reinstall quantgraph from source (`pip install '.[onednn]'`; its build takes oneDNN's "
        "headers from onednn-devel-cpu-gomp)",
        separator=": ",
    )


def _loaded_dnnl() -> Path | None:
    """The libdnnl.so.3 this process has mapped already, if any."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith(DNNL_SONAME):
            return Path(fields[5]).resolve()
    return None


def _load_global(path: Path) -> ctypes.CDLL:
    """dlopen ``path`` into the global scope, first loading the sibling libraries it names as
    missing (SYCL builds of oneDNN have no RUNPATH for their libtbb/libsycl)."""
    for _ in range(64):
        try:
            return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            match = _MISSING_LIBRARY.search(str(error))
            sibling = path.parent / match.group(1) if match else None
            if sibling is None or not sibling.is_file():
                raise BackendError(f"cannot load oneDNN {path}: {error}") from None
            _load_global(sibling)
    raise BackendError(f"cannot load oneDNN {path}: too many missing libraries")


def _set_opencl_loader(directory: Path) -> None:
    # The SYCL build's CPU engine finds its OpenCL runtime through the ICD loader.
    if os.environ.get("OCL_ICD_FILENAMES"):
        return
    found = sorted(p for p in directory.glob("libintelocl.so*") if _SHARED.fullmatch(p.name))
    if found:
        os.environ["OCL_ICD_FILENAMES"] = str(found[-1])


@cache
def load() -> ctypes.CDLL:
    """Load oneDNN into the process (once) and return it."""
    wanted = dnnl_path()
    present = _loaded_dnnl()
    if present is not None and present != wanted:
        raise BackendError(
            f"this process already has another oneDNN loaded ({present}); two libdnnl.so.3 "
            f"cannot live in one process: run with {ENV_LIBRARY}={present} or in a new process"
        )
    _set_opencl_loader(wanted.parent)
    # OpenMP's threads spin after each oneDNN call by default and fight onnxruntime's own
    # (spinning) intra-op threads for the cores: 1M-element DynamicQuantize took 16 ms instead
    # of 0.3 ms on 2 cores. libgomp reads this once, when it loads: the user's setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return _load_global(wanted)


class _Version(ctypes.Structure):
    _fields_ = (
        ("major", ctypes.c_int),
        ("minor", ctypes.c_int),
        ("patch", ctypes.c_int),
        ("hash", ctypes.c_char_p),
        ("cpu_runtime", ctypes.c_uint),
        ("gpu_runtime", ctypes.c_uint),
    )


@cache
def version_tuple() -> tuple[int, int, int]:
    """(major, minor, patch) of the oneDNN the backend loads."""
    function = load().dnnl_version
    function.restype = ctypes.POINTER(_Version)
    function.argtypes = []
    found = function().contents
    return int(found.major), int(found.minor), int(found.patch)


def version() -> str:
    """Which oneDNN the backend runs, e.g. ``oneDNN v3.2.0 (/.../libdnnl.so.3)``."""
    major, minor, patch = version_tuple()
    return f"oneDNN v{major}.{minor}.{patch} ({dnnl_path()})"


def is_available() -> bool:
    """True when oneDNN and the kernel library are both there (nothing is loaded)."""
    try:
        dnnl_path()
        kernels_path()
    except BackendError:
        return False
    return sys.platform.startswith("linux")


def _missing() -> LibraryMissing | None:
    try:
        dnnl_path()
        kernels_path()
    except LibraryMissing as missing:
        return missing
    return None


def unavailable_reason() -> str | None:
    """Why the backend cannot run here, in one line; None when it can."""
    missing = _missing()
    return None if missing is None else str(missing)


def register(options: ort.SessionOptions) -> None:
    """Register oneDNN-backed kernels of domain com.quantgraph in ``options`` (oneDNN is
    loaded first). Not together with another backend in the same options."""
    load()
    options.register_custom_ops_library(str(kernels_path()))


class OnednnBackend(Backend):
    """oneDNN's Graph API runs the ops: oneDNN's arithmetic, its refusals. Only when asked for."""

    name = "onednn"
    arithmetics = ("onednn",)
    arithmetic_refusal = "the onednn backend computes oneDNN's own arithmetic, not 'onnx'"
    engine = "oneDNN Graph (single-op partitions on oneDNN's CPU engine)"
    by_default = False
    registers_partitions = True  # its library registers OneDnnPartition too (config "all")

    def available(self) -> Unavailable | None:
        missing = _missing()
        if missing is None:
            return None
        message = f"the onednn backend cannot run: {missing}"
        return Unavailable(self.name, missing.reason, missing.hint, message)

    def register(self, options: ort.SessionOptions, arithmetic: Arithmetic) -> None:
        register(options)

    def engine_version(self) -> str | None:
        return version()


BACKEND = OnednnBackend()

__all__ = [
    "BACKEND",
    "DISTRIBUTIONS",
    "ENV_KERNELS",
    "ENV_KERNELS_DEPRECATED",
    "ENV_LIBRARY",
    "INSTALL_HINT",
    "OnednnBackend",
    "dnnl_path",
    "is_available",
    "kernels_path",
    "load",
    "register",
    "unavailable_reason",
    "version",
    "version_tuple",
]
