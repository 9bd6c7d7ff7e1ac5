"""The published-format fuzzer (tools.fuzz.formats): a few drawn models of each pattern run
through convert, validate and lower; what it draws is what its pass accepts or the refusal it
was drawn to be."""

from __future__ import annotations

import pytest

import quantgraph
from tests.builders import requires_native
from tools.fuzz.format_models import LEFT
from tools.fuzz.formats import PATTERNS, SeededKnobs, rebuild, run_formats

pytestmark = requires_native


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_short_run_draws_accepted_and_refused_models(pattern: str) -> None:
    report = run_formats([pattern], examples=12, seed=3)
    stats = report.patterns[pattern]
    assert stats.examples == 12
    assert stats.converted + sum(stats.refused.values()) >= 12
    assert stats.converted > 0
    assert report.failures == 0, report.details


def test_a_seed_rebuilds_the_same_model() -> None:
    one, two = rebuild("qoperator", 97), rebuild("qoperator", 97)
    assert one.model.SerializeToString() == two.model.SerializeToString()
    assert SeededKnobs(5).int("k", 0, 9) == SeededKnobs(5).int("k", 0, 9)


def test_a_weight_only_chain_that_is_not_one_is_left_alone() -> None:
    expects = {rebuild("cast_scale", seed).expect for seed in range(40)}
    assert {None, LEFT} <= expects


@pytest.mark.parametrize("pattern", PATTERNS)
def test_an_onnxruntime_plan_accounts_for_every_spec_op(pattern: str) -> None:
    """Units and ops left alone together name each spec op once (a MatMulNBits' dequantize,
    folded back into its original node, was in neither)."""
    seeds = (s for s in range(200) if rebuild(pattern, s).expect is None)
    for seed in list(seeds)[:4]:
        converted = quantgraph.convert(rebuild(pattern, seed).model).proto
        session = quantgraph.InferenceSession(converted, "native", fusion="onnxruntime")
        plan = session.fusion_plan
        spec = [n.name for n in converted.graph.node if n.domain == "com.quantgraph"]
        covered = [n for u in plan.units for n in u.nodes] + [a.node for a in plan.alone]
        assert sorted(covered) == sorted(spec), (seed, plan.to_dict())
