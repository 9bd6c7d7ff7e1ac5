"""The runs of the bound a model gives (:mod:`quantgraph.validation.compare.rounding_spread`):
the reference's noisy copy run again and again under rounding noise, each output's spread its
bound.

Where whether a bound is needed is known before the original runs, the noisy copy (its noise
off: bit for bit the reference) stands in for the reference, one session for both
(:func:`noisy_reference`); otherwise the bound's runs get a session of their own
(:func:`bound_in_own_session`), made once the original's is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

import numpy as np
import onnx
import onnx_ir as ir

from ..fusion.plan import ONNXRUNTIME
from .compare import rounding_spread
from .compare.error_stats import quantization_steps
from .comparison_setup import Setup
from .original import Original, Progress, run_session


def noisy_reference(
    setup: Setup, original: ir.Model, rewritten: ir.Model, atol: float, rtol: float
) -> tuple[list[rounding_spread.Site] | None, ir.Model | onnx.ModelProto | None]:
    """(the noise's sites, the noisy copy) where the reference can be its noisy copy, else
    (None, the reference's model: None for the original itself).

    Where no fusion plan can give the original's nodes back (given_back: fusion "onnxruntime"),
    whether a bound is needed is known now: the reference is then its noisy copy with the noise
    off (bit for bit the reference: rounding_spread.with_noise), one session (one copy of the
    weights) for the reference's outputs, the bound's runs and the generation, gone before the
    rewritten model's session is made."""
    reference_model = setup.exposed or (setup.like.proto if setup.like else None)
    bound_now = setup.judged and not (atol or rtol) and setup.fusion != ONNXRUNTIME
    if not (bound_now and setup.exposed is None and setup.reference is None):
        return None, reference_model
    base = setup.noise_base(original)
    sites = rounding_spread.sites(base, rewritten, setup.integer, setup.kernels, bool(setup.qop))
    return sites, rounding_spread.with_noise(base, sites)


def bound_in_own_session(
    source: Original,
    setup: Setup,
    rewritten: ir.Model,
    outputs: list[str],
    declared: Mapping[str, int | None],
    samples: Sequence[Mapping[str, np.ndarray]],
    tell: Progress,
) -> rounding_spread.SpreadBound:
    """The bound from a noisy copy of the reference in a session of its own, gone on return."""
    base = setup.noise_base(source.ir)
    found_sites = rounding_spread.sites(
        base, rewritten, setup.integer, setup.kernels, bool(setup.qop)
    )
    tell("spread", 0, len(samples))
    noisy = source.session(setup.level, rounding_spread.with_noise(base, found_sites))
    return spread_bound(source, found_sites, partial(run_session, noisy, outputs), outputs,
                        declared, samples, None, tell)  # fmt: skip


def spread_bound(
    source: Original,
    sites: list[rounding_spread.Site],
    noisy: Callable[[Mapping[str, np.ndarray]], list[np.ndarray]],
    outputs: list[str],
    declared: Mapping[str, int | None],
    samples: Sequence[Mapping[str, np.ndarray]],
    still: Sequence[Sequence[np.ndarray]] | None,
    tell: Progress,
) -> rounding_spread.SpreadBound:
    """Each output's bound from the reference's own spread under rounding noise
    (:mod:`quantgraph.validation.compare.rounding_spread`): ``noisy`` runs the noisy copy on
    feeds (its switch among them); ``still``: its outputs with the noise off on each sample,
    where in hand."""
    per_sample = rounding_spread.RUNS + (still is None)
    tell("spread", 0, len(samples))
    done = [0]

    def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        found = noisy(feeds)
        done[0] += 1
        if done[0] % per_sample == 0:
            tell("spread", done[0] // per_sample, len(samples))
        return found

    values = rounding_spread.spread(run, outputs, declared, samples, still=still)
    steps = quantization_steps(source.ir.graph)
    return rounding_spread.SpreadBound(
        sites,
        rounding_spread.RUNS,
        len(samples),
        values,
        {name: steps[name] for name in outputs if name in steps},
    )
