"""The native backend: quantgraph's C++ kernel library (custom_ops/) registered in onnxruntime.

``pip install .`` (or ``pip install -e .``) builds ``libquantgraph_ops.so`` with CMake and puts it
in ``quantgraph/_native/``. The library registers the four ops of domain ``com.quantgraph`` for
the CPU execution provider: SIMD kernels (AVX-512 / AVX2 / portable, picked at run time; cap it
with ``QUANTGRAPH_NATIVE_ISA=scalar|avx2|avx512``), threaded on the session's intra-op pool,
bit-exact with :mod:`quantgraph.reference`. Rule violations are onnxruntime errors whose text
contains the spec's message (``<Op> node '<name>': <rule text> [rule <id>]``): at session
creation for what the node alone decides (attributes, types), else at run time.

``QUANTGRAPH_NATIVE_LIBRARY`` overrides the library's location (``QUANTGRAPH_NATIVE_LIB``, its
earlier name, still works).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BackendError
from .base import Arithmetic, Backend, LibraryMissing, Unavailable
from .environment import library_override

if TYPE_CHECKING:  # onnxruntime loads when a session is made, not when the registry is listed
    import onnxruntime as ort

ENV_LIBRARY = "QUANTGRAPH_NATIVE_LIBRARY"
ENV_LIBRARY_DEPRECATED = "QUANTGRAPH_NATIVE_LIB"
ENV_ISA = "QUANTGRAPH_NATIVE_ISA"
ARITHMETIC_ENTRY = "quantgraph.arithmetic"  # session config entry the library reads


def _library_name() -> str:
    if sys.platform == "darwin":
        return "libquantgraph_ops.dylib"
    if sys.platform == "win32":
        return "quantgraph_ops.dll"
    return "libquantgraph_ops.so"


LIBRARY_NAME = _library_name()

BUILD_HINT = (
    "build it with `pip install .` (or `pip install -e .`) from the quantgraph source tree, which "
    "needs a C++17 compiler and cmake (the onnxruntime headers are fetched at build time; see "
    "custom_ops/README.md), or point QUANTGRAPH_NATIVE_LIBRARY at a built libquantgraph_ops.so"
)


def _candidates() -> list[Path]:
    """Where the installed library may be: quantgraph/_native in each of the package's paths.

    An editable install (scikit-build-core's redirect mode) spreads the package over the
    source tree and site-packages; ``__path__`` lists both.
    """
    import quantgraph

    return [Path(entry) / "_native" / LIBRARY_NAME for entry in quantgraph.__path__]


def library_path() -> Path:
    """The native kernel library: $QUANTGRAPH_NATIVE_LIBRARY, else the one installed in the package.

    Raises :class:`~quantgraph.backends.base.LibraryMissing` (a
    :class:`~quantgraph.errors.BackendError`) saying how to build it when there is none.
    """
    override = library_override(ENV_LIBRARY, ENV_LIBRARY_DEPRECATED)
    if override:
        variable, value = override
        path = Path(value).expanduser()
        if not path.is_file():
            raise LibraryMissing(
                f"{variable}={value!r} is not a file",
                f"unset it or {BUILD_HINT}",
                variable=variable,
            )
        return path.resolve()
    candidates = _candidates()
    for path in candidates:
        if path.is_file():
            return path.resolve()
    looked = ", ".join(str(p) for p in candidates)
    raise LibraryMissing(
        f"the native kernel library is not built (looked for {looked})", BUILD_HINT
    )


def is_available() -> bool:
    """True when the library exists (it is loaded only by :func:`register`)."""
    try:
        library_path()
    except BackendError:
        return False
    return True


def register(options: ort.SessionOptions) -> None:
    """Register the native kernels of domain com.quantgraph in ``options``.

    Do not also register the Python backend in the same options: one session cannot take the
    same domain from two libraries.
    """
    options.register_custom_ops_library(str(library_path()))


def isa() -> str:
    """The kernel instruction set sessions created now will use, and the CPU's best one.

    For example ``"avx512 (best avx512)"``, or ``"avx2 (best avx512)"`` with
    ``QUANTGRAPH_NATIVE_ISA=avx2``. The ISA is chosen when a session creates its kernels.
    """
    library = ctypes.CDLL(str(library_path()))
    function = library.QuantgraphNativeIsa
    function.restype = ctypes.c_char_p
    function.argtypes = []
    result: bytes = function()
    return result.decode()


# What the session-level error says when nothing names a library and none is built.
NOT_BUILT_HINT = (
    "reinstall quantgraph with a C++ compiler and cmake (`pip install .`; see README), set "
    "QUANTGRAPH_NATIVE_LIBRARY, or use backend='python'"
)


class NativeBackend(Backend):
    """quantgraph's C++ kernels, in either arithmetic (session config entry
    ``quantgraph.arithmetic``)."""

    name = "native"
    arithmetics = ("onnx", "onednn")
    engine = "quantgraph's C++ kernels (custom_ops/)"

    def available(self) -> Unavailable | None:
        try:
            library_path()
        except LibraryMissing as missing:
            if missing.variable is not None:
                message = f"the native backend cannot run: {missing}"
                return Unavailable(self.name, missing.reason, missing.hint, message)
            return Unavailable(
                self.name,
                "the native kernel library is not built",
                NOT_BUILT_HINT,
                f"the native backend is not built: {NOT_BUILT_HINT}",
            )
        return None

    def requested(self) -> bool:
        """A set QUANTGRAPH_NATIVE_LIBRARY asks for the native library: if it is wrong, that is
        an error, never a silent fall-back to another backend."""
        return any(os.environ.get(name) for name in (ENV_LIBRARY, ENV_LIBRARY_DEPRECATED))

    def register(self, options: ort.SessionOptions, arithmetic: Arithmetic) -> None:
        # Read by the library when it registers its kernels: set it first.
        options.add_session_config_entry(ARITHMETIC_ENTRY, arithmetic)
        register(options)


BACKEND = NativeBackend()

__all__ = [
    "ARITHMETIC_ENTRY",
    "BACKEND",
    "BUILD_HINT",
    "ENV_ISA",
    "ENV_LIBRARY",
    "ENV_LIBRARY_DEPRECATED",
    "LIBRARY_NAME",
    "NOT_BUILT_HINT",
    "NativeBackend",
    "is_available",
    "isa",
    "library_path",
    "register",
]
