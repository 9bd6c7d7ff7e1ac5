"""Bad tensors at run time, threads and long runs: clear errors, no crash, no growth.

Each bad call must become an error naming op, node and rule on both backends; the session must
keep working afterwards. The native backend must give identical results from 8 threads and must
not grow in memory over 10k runs.
"""

from __future__ import annotations

import gc
import resource
import threading
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import quantgraph
from tests.builders import BACKENDS, requires_native, spec_op_model


def _dynamic_model(op: str, src_type: int, dst_type: int, **attributes: Any) -> onnx.ModelProto:
    """One quantgraph op whose src, scales and zps are graph inputs of any length."""
    return spec_op_model(
        op,
        (src_type, ["a", "b"]),
        (TensorProto.FLOAT, ["c"]),
        (TensorProto.UINT8, ["d"]),
        dst_type=dst_type,
        name="the_node",
        graph_name="robustness",
        **attributes,
    )


GOOD: dict[str, np.ndarray] = {
    "src": np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3),
    "scales": np.array([0.5, 0.25, 0.125], np.float32),
    "zps": np.array([1, 2, 3], np.uint8),
}
BAD_CALLS = [
    pytest.param(
        {"scales": np.array([0.5, 0.25], np.float32)}, "per-channel-scale-count", id="scale-count"
    ),
    pytest.param({"zps": np.array([1, 2], np.uint8)}, "zps-count", id="zps-count"),
    pytest.param({"scales": np.array([0.5, 0.0, 1.0], np.float32)}, "scale-value", id="zero-scale"),
    pytest.param(
        {"scales": np.array([0.5, np.inf, 1.0], np.float32)}, "scale-value", id="inf-scale"
    ),
    pytest.param(
        {"scales": np.array([0.5, np.nan, 1.0], np.float32)}, "scale-value", id="nan-scale"
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("change", "rule"), BAD_CALLS)
def test_bad_tensor_is_an_error_naming_op_and_rule_then_the_session_works(
    backend: str, change: dict[str, np.ndarray], rule: str
) -> None:
    model = _dynamic_model(
        "DynamicQuantize", TensorProto.FLOAT, TensorProto.UINT8, qtype="per_channel", axis=1
    )
    session = quantgraph.InferenceSession(model, backend)
    with pytest.raises(Exception, match=rf"DynamicQuantize node .*\[rule {rule}\]") as caught:
        session.run(None, {**GOOD, **change})
    if backend == "native":
        assert "the_node" in str(caught.value)  # the python backend cannot see node names
    good = session.run(None, GOOD)[0]
    expected = quantgraph.reference.dynamic_quantize(
        GOOD["src"], GOOD["scales"], GOOD["zps"], qtype="per_channel", axis=1
    )
    np.testing.assert_array_equal(good, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [2, -3])
def test_axis_out_of_range_is_an_error(backend: str, axis: int) -> None:
    model = _dynamic_model(
        "DynamicQuantize", TensorProto.FLOAT, TensorProto.UINT8, qtype="per_channel", axis=axis
    )
    # The declared rank decides it: at session creation (python) or at the first run (native).
    with pytest.raises(Exception, match=r"DynamicQuantize node .*\[rule axis-range\]"):
        quantgraph.InferenceSession(model, backend).run(None, GOOD)


@requires_native
def test_eight_threads_on_one_native_session_agree() -> None:
    model = _dynamic_model(
        "DynamicQuantize", TensorProto.FLOAT, TensorProto.UINT8, qtype="per_channel", axis=1
    )
    session = quantgraph.InferenceSession(model, "native")
    rng = np.random.default_rng(7)
    feeds: list[dict[str, np.ndarray]] = [
        {
            "src": rng.standard_normal((512, 257)).astype(np.float32) * 40,
            "scales": rng.uniform(0.05, 2.0, 257).astype(np.float32),
            "zps": rng.integers(0, 256, 257).astype(np.uint8),
        }
        for _ in range(8)
    ]
    expected = [session.run(None, f)[0] for f in feeds]
    results: dict[int, list[np.ndarray]] = {i: [] for i in range(8)}
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for _ in range(25):
                results[index].append(session.run(None, feeds[index])[0])
        except BaseException as error:  # collected and re-raised in the test thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    for index in range(8):
        assert len(results[index]) == 25
        for result in results[index]:
            np.testing.assert_array_equal(result, expected[index])


def _rss_kib() -> int:
    with open("/proc/self/statm") as stream:
        return int(stream.read().split()[1]) * resource.getpagesize() // 1024


@requires_native
def test_ten_thousand_native_runs_do_not_grow_memory() -> None:
    model = _dynamic_model(
        "DynamicDequantize", TensorProto.UINT8, TensorProto.FLOAT, qtype="per_tensor"
    )
    session = quantgraph.InferenceSession(model, "native")
    feeds: dict[str, np.ndarray] = {
        "src": np.arange(4096, dtype=np.uint8).reshape(64, 64),
        "scales": np.array([0.5], np.float32),
        "zps": np.array([3], np.uint8),
    }
    for _ in range(500):  # warm-up: arenas and caches reach their steady size
        session.run(None, feeds)
    gc.collect()
    before = _rss_kib()
    for _ in range(10_000):
        session.run(None, feeds)
    gc.collect()
    growth = _rss_kib() - before
    assert growth < 16 * 1024, f"RSS grew by {growth} KiB over 10k runs"
