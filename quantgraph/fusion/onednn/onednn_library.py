"""The plan-time C ABI of libquantgraph_onednn (partition contract §2), through ctypes.

``partitions(text)`` asks the loaded oneDNN which partitions it makes of a description;
``compile_reason(text)`` whether one partition compiles for its known input dims (None) or
why not. Both return one-line errors, never raise on oneDNN's refusals.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

from ...errors import BackendError

FIRST_BUFFER = 1 << 16
LARGEST_BUFFER = 1 << 26


@dataclass(frozen=True)
class Partition:
    supported: bool
    ops: tuple[int, ...]


@cache
def library() -> ctypes.CDLL:
    """libquantgraph_onednn with oneDNN loaded first (its dnnl_* symbols bind to it)."""
    from ...backends import onednn

    onednn.load()
    found = ctypes.CDLL(str(onednn.kernels_path()))
    for name in ("QuantgraphOnednnPartitions", "QuantgraphOnednnCompile"):
        if not hasattr(found, name):
            raise BackendError(
                f"fusion 'onednn': {onednn.kernels_path()} has no {name} (built before "
                "oneDNN partitions): rebuild quantgraph (`make setup`)"
            )
        function = getattr(found, name)
        function.restype = ctypes.c_int
        function.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t)
    return found


def _call(name: str, text: str) -> tuple[int, str]:
    function = getattr(library(), name)
    size = FIRST_BUFFER
    while True:
        buffer = ctypes.create_string_buffer(size)
        code = int(function(text.encode("ascii"), buffer, size))
        if code != 2 or size >= LARGEST_BUFFER:
            return code, buffer.value.decode("ascii", "replace").strip()
        size *= 4


@cache
def int8_saturates() -> bool:
    """Whether the loaded oneDNN's int8 convolution/matmul on this CPU saturate for s8 weights
    beyond +-64 (no VNNI: u8 x s8 products summed in int16 pairs; the OneDnnPartition kernel
    refuses such weights)."""
    function = getattr(library(), "QuantgraphOnednnInt8Saturates", None)
    if function is None:
        return True  # an older library: assume the worst
    function.restype = ctypes.c_int
    function.argtypes = []
    return bool(function())


def partitions(text: str) -> list[Partition]:
    """oneDNN's partitions of the graph ``text`` describes (a BackendError with oneDNN's one
    line when it refuses the graph)."""
    code, out = _call("QuantgraphOnednnPartitions", text)
    if code != 0:
        raise BackendError(f"oneDNN refused the graph: {out or f'error {code}'}")
    found = []
    for line in out.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "partition":
            raise BackendError(f"unexpected line from QuantgraphOnednnPartitions: {line!r}")
        found.append(Partition(words[1] == "1", tuple(int(w) for w in words[2:])))
    return found


def compile_reason(text: str) -> str | None:
    """None when oneDNN compiles the one partition ``text`` describes, else why not."""
    code, out = _call("QuantgraphOnednnCompile", text)
    return None if code == 0 else (out or f"error {code}")
