"""The plan-time C ABI of libquantgraph_onednn (QuantgraphOnednnPartitions / Compile): oneDNN's
own partitioning of a description, and its one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.builders import requires_onednn
from tests.onednn.partition_support import Description, call, conv_unit, matmul_unit

pytestmark = requires_onednn

PARTITIONS = "QuantgraphOnednnPartitions"
COMPILE = "QuantgraphOnednnCompile"


def _conv(**kwargs: bool) -> tuple[Description, list[int]]:
    return conv_unit(
        src=[1, 8, 10, 10],
        out_channels=16,
        x_scale=0.05,
        x_zp=128,
        w_scales=np.linspace(0.005, 0.02, 16),
        y_scale=0.1,
        y_zp=0,
        **kwargs,
    )


def _matmul() -> Description:
    return matmul_unit(
        m=1, k=768, n=768, x_scale=0.05, x_zp=128, w_scales=np.full(768, 0.01), y_scale=0.1
    )


def test_conv_unit_is_one_supported_partition_of_all_five_ops() -> None:
    description, ops = _conv()
    assert len(ops) == 5
    assert call(PARTITIONS, description.text()) == (0, f"partition 1 {' '.join(map(str, ops))}\n")
    assert call(COMPILE, description.text()) == (0, "")


def test_a_wildcard_in_the_middle_splits_the_partitions() -> None:
    description, ops = _conv(wildcard=True)
    code, text = call(PARTITIONS, description.text())
    assert code == 0
    lines = text.splitlines()
    assert len(lines) > 1
    parts = [line.split() for line in lines]
    wildcard = ops[3]
    assert ["partition", "0", str(wildcard)] in parts  # oneDNN does not run a Wildcard
    assert ["partition", "1", *map(str, ops[:3])] in parts  # DQ + DQ + Convolution fused
    covered = sorted(int(i) for p in parts for i in p[2:])
    assert covered == sorted(ops)
    code, text = call(COMPILE, description.text())
    assert code == 1
    assert text.startswith("oneDNN splits the ops into") and "\n" not in text


def test_matmul_int8_unit_is_one_partition_and_compiles() -> None:
    description = _matmul()
    assert call(PARTITIONS, description.text()) == (0, "partition 1 0 1 2 3\n")
    assert call(COMPILE, description.text()) == (0, "")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("MatMul", "MatMull"), "op 2: unknown kind 'MatMull'"),
        (("axis=i:1", "axis=f:1"), "op 0 Dequantize: attribute axis: type 'f', oneDNN's is 'i'"),
        (("axis=i:1", "axes=i:1"), None),
        (("zps=i:128", "zip=i:128"), "op 0 Dequantize: unknown attribute 'zip'"),
        (("tensor 0 u8", "tensor 0 u9"), "tensor 0: unknown dtype 'u9'"),
        (("qgpart 1", "qgpart 2"), "line 1: a description starts with 'qgpart 1'"),
        (("in=0 ", "in=9 "), "op 0 Dequantize: input tensor 9 is not declared"),
        (("scales=f:", "scales=f:zz,"), "op 0 Dequantize: attribute scales: 'zz"),
    ],
)
def test_a_bad_description_is_one_line_naming_the_op_or_tensor(
    change: tuple[str, str], message: str | None
) -> None:
    text = _matmul().text().replace(*change, 1)
    for entry in (PARTITIONS, COMPILE):
        code, got = call(entry, text)
        assert code == 1, got
        assert "\n" not in got and got
        if message is not None:
            assert got.startswith(message), got


def test_an_attribute_onednn_refuses_names_the_op_and_the_status() -> None:
    # Quantize without the scales oneDNN requires: refused when the op is added.
    text = _matmul().text()
    last = next(line for line in text.splitlines() if line.startswith("op 3 Quantize"))
    stripped = " ".join(t for t in last.split() if not t.startswith("scales="))
    code, got = call(PARTITIONS, text.replace(last, stripped))
    assert code == 1
    assert got.startswith("op 3 Quantize: dnnl_invalid_graph_op (adding the op)"), got


def test_too_small_a_buffer_gives_2_and_the_retry_succeeds() -> None:
    text = _matmul().text()
    assert call(PARTITIONS, text, size=8) == (2, "")
    assert call(PARTITIONS, text, size=len("partition 1 0 1 2 3\n") + 1)[0] == 0
    assert call(PARTITIONS, "qgpart 7", size=4)[0] == 2  # the error does not fit either
    assert call(COMPILE, text, size=0)[0] == 2


def test_compile_needs_every_input_dim() -> None:
    text = _matmul().text().replace("tensor 0 u8 var 1,768", "tensor 0 u8 var ?,768")
    assert call(PARTITIONS, text)[0] == 0
    assert call(COMPILE, text) == (1, "tensor 0: an input's dims must be known to compile")


def test_a_unit_that_does_not_compile_for_its_shapes_says_why() -> None:
    # Inner dims that disagree (768 vs 512): partitioned, but oneDNN cannot compile it.
    text = _matmul().text().replace("tensor 1 s8 const 768,768", "tensor 1 s8 const 512,768")
    assert call(PARTITIONS, text)[0] == 0
    code, got = call(COMPILE, text)
    assert code == 1
    assert got.startswith("oneDNN 3.") and "cannot compile ops [0 1 2 3]" in got, got
    assert "\n" not in got
