"""oneDNN Graph's quantized gated MLP on onnxruntime-genai's int4 decoders (tools/decoders.py).

oneDNN v3.7+ fuses 4-bit weights in one pattern only, ``quantized_gated_mlp_v1``
(src/graph/backend/dnnl/patterns/mlp.cpp): DynamicDequantize -> MatMul (gate) and (up) on one
input, Sigmoid(gate) * gate, * up, then DynamicDequantize -> MatMul (down). The translation
tests run without oneDNN; the plan tests need libquantgraph_onednn, and the v3.7+ one a oneDNN
named by QUANTGRAPH_ONEDNN_LIBRARY (PyPI's ``onednn`` 2026.1.0 = v3.13.2; skipped otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

import quantgraph
from quantgraph.fusion.onednn import onednn_engine, onednn_shapes
from quantgraph.fusion.onednn.onednn_description import Op
from quantgraph.fusion.onednn.onednn_translate import SPEC, Translation, translate
from quantgraph.fusion.plan import LeftAlone, Unit
from tests.test_fusion_onednn import requires_partitions
from tools.decoders import TINY, decoder_proto

GATED_MLP_KERNEL = "oneDNN partition: DynamicDequantize x3, MatMul x3, Sigmoid, Multiply x2"


def _converted() -> ir.Model:
    model = quantgraph.convert(decoder_proto(TINY)).model
    onednn_shapes.infer(model)
    return model


def _gated_mlps(translation: Translation) -> list[tuple[Op, ...]]:
    """Each (deq gate, gate, deq up, up, sigmoid, swish, product, deq down, down) the
    translation holds, matched as oneDNN's quantized_gated_mlp_v1 pattern matches them."""
    producer = {t: o for o in translation.ops for t in o.outputs}
    found: list[tuple[Op, ...]] = []
    for down in translation.ops:
        if down.kind != "MatMul":
            continue
        deq_down, product = producer.get(down.inputs[1]), producer.get(down.inputs[0])
        if deq_down is None or deq_down.kind != "DynamicDequantize" or product is None:
            continue
        if product.kind != "Multiply":
            continue
        swish, up = (producer.get(t) for t in product.inputs)
        if swish is None or swish.kind != "Multiply" or up is None or up.kind != "MatMul":
            continue
        gate, sigmoid = (producer.get(t) for t in swish.inputs)
        if sigmoid is None or sigmoid.kind != "Sigmoid" or gate is None or gate.kind != "MatMul":
            continue
        assert sigmoid.inputs == gate.outputs
        assert gate.inputs[0] == up.inputs[0]  # one activation into gate and up
        deq_gate, deq_up = producer[gate.inputs[1]], producer[up.inputs[1]]
        found.append((deq_gate, gate, deq_up, up, sigmoid, swish, product, deq_down, down))
    return found


def test_a_builder_decoder_reaches_onednn_as_its_gated_mlp_pattern(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the contrib ops (SkipSimplifiedLayerNormalization, GroupQueryAttention) the
    activations are typed f32 (onnxruntime's symbolic shape inference), so each layer's MLP is
    translated whole: constant s4 weights, per_group dequantize, MatMuls and the SiLU as
    Sigmoid + Multiply, as the pattern needs."""
    monkeypatch.chdir(tmp_path)
    translation = translate(_converted(), (3, 13, 2))
    assert not list(tmp_path.iterdir())  # nothing written where it runs
    mlps = _gated_mlps(translation)
    assert len(mlps) == TINY.layers
    for deq_gate, gate, deq_up, up, _, _, _, deq_down, down in mlps:
        for deq in (deq_gate, deq_up, deq_down):
            assert translation.roles[deq.id] == SPEC
            weight = translation.tensors[deq.inputs[0]]
            assert (weight.dtype, weight.const) in (("s4", True), ("u4", True))
            assert deq.attr("qtype") == ("per_group",)
            group = deq.attr("group_shape")
            assert group is not None and group[-1] == 1 and int(group[0]) > 1  # type: ignore[call-overload]
            assert translation.tensors[deq.inputs[1]].const  # scales
        for matmul in (gate, up, down):
            activation = translation.tensors[matmul.inputs[0]]
            assert activation.dtype == "f32" and activation.dims is not None
            assert activation.dims[-1] == translation.tensors[matmul.inputs[1]].dims[0]  # type: ignore[index]


def test_before_v3_7_the_dequantizes_say_which_version_they_need() -> None:
    translation = translate(_converted(), (3, 2, 0))
    assert not _gated_mlps(translation)
    reasons = {r for name, r in translation.reasons.items() if "_weight" in name}
    assert reasons and all("needs oneDNN v3.7+ (loaded v3.2.0" in r for r in reasons)


def _loaded_version() -> tuple[int, int, int] | None:
    from tests.test_fusion_onednn import _partition_abi_missing

    if _partition_abi_missing() is not None:
        return None
    from quantgraph.backends import onednn

    return onednn.version_tuple()


requires_v3_7 = pytest.mark.skipif(
    (_loaded_version() or (0, 0, 0)) < (3, 7, 0),
    reason="needs oneDNN v3.7+ through QUANTGRAPH_ONEDNN_LIBRARY (e.g. PyPI's onednn==2026.1.0: "
    f"its lib/libdnnl.so.3); loaded: {_loaded_version()}",
)


@requires_partitions
def test_the_plan_of_the_gated_mlp_follows_the_loaded_onednn() -> None:
    model = _converted()
    plan = onednn_engine.plan(model)
    version = _loaded_version()
    assert version is not None
    mlp = [a for a in plan.alone if "/mlp/" in a.node]
    fused = [u for u in plan.units if "/mlp/" in u.compute]
    if version < (3, 7, 0):
        assert not fused and len(mlp) == 3 * TINY.layers
        assert all("needs oneDNN v3.7+" in a.reason for a in mlp)
    else:
        _v3_7_plan(fused, mlp)


def _v3_7_plan(fused: Sequence[Unit], mlp: Sequence[LeftAlone]) -> None:
    # Either oneDNN compiles the pattern (its kernel names it), or the plan says why not.
    for unit in fused:
        assert unit.kernel == GATED_MLP_KERNEL
        assert len(unit.nodes) == 3
    for alone in mlp:
        assert "forms its quantized gated-MLP partition but cannot compile it" in alone.reason
        assert "apply_to_int" in alone.reason
    assert len(fused) * 3 + len(mlp) == 3 * TINY.layers


@requires_v3_7
def test_a_formed_gated_mlp_computes_the_spec_composition() -> None:
    """Where oneDNN compiles the partition, the decoder's outputs with it are the unfused spec
    composition's (which is MatMulNBits at accuracy_level 0, bit for bit) up to the order of
    float32 sums: within K * eps * max|reference| for the widest K the MLP sums over."""
    plan = onednn_engine.plan(_converted())
    if not any("/mlp/" in u.compute for u in plan.units):
        pytest.skip(f"oneDNN forms no gated-MLP unit here: {plan.alone[-2].reason}")
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {
        "input_ids": rng.integers(0, TINY.vocab, (1, 16)).astype(np.int64),
        "attention_mask": np.ones((1, 16), np.int64),
    }
    for layer in range(TINY.layers):
        for kind in ("key", "value"):
            shape = (1, TINY.kv_heads, 0, TINY.head_size)
            feeds[f"past_key_values.{layer}.{kind}"] = np.zeros(shape, np.float32)
    converted = quantgraph.convert(decoder_proto(TINY)).model
    fused = quantgraph.InferenceSession(converted, "native", fusion="onednn")
    assert any(u.kernel == GATED_MLP_KERNEL for u in fused.fusion_plan.units)
    unfused = quantgraph.InferenceSession(converted, "native", fusion="none")
    widest = max(TINY.hidden, TINY.intermediate)
    for got, want in zip(fused.run(None, feeds), unfused.run(None, feeds), strict=True):
        bound = widest * np.finfo(np.float32).eps * float(np.abs(want).max())
        assert float(np.abs(got - want).max()) <= bound
