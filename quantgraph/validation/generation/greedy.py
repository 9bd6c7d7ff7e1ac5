"""Validating a decoder the way decoders are used: a short greedy generation on both models.

A prompt of P token ids drawn inside the vocabulary from the seed; the prefill (the prompt, an
empty cache); then N steps, each feeding the model's own argmax token and its own ``present``
outputs back as ``past`` (:mod:`.decoder_feeds` builds the feeds from the signature). Each step
compares the tokens chosen and the logits, the logits by the rule the report judges its outputs
with (:class:`quantgraph.validation.compare.judge.Judge`), while both models have been fed the same
tokens (:mod:`.generation_report`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ...errors import ModelError
from ..compare.judge import Judge
from ..inputs.decoder import DecoderSignature, decoder_signature
from ..inputs.plan import describe_feeds
from .decoder_feeds import DecoderFeeds, Feeds
from .generation_report import GenerationReport, GenerationStep

DEFAULT_STEPS = 8
DEFAULT_PROMPT_TOKENS = 16

# run(output names, feeds) -> the outputs, in that order.
Runner = Callable[[Sequence[str], Feeds], Sequence[np.ndarray]]
# tell(side, step done, steps): "original" or "rewritten", before each run.
Tell = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Generation:
    """What to generate with: the original's signature, its feeds, the steps and the prompt."""

    signature: DecoderSignature
    feeds: DecoderFeeds
    steps: int
    prompt_tokens: int


def check_generation(
    original: ir.Model, steps: int | None, prompt_tokens: int | None, label: str
) -> Generation | None:
    """The generation a validation runs (None: none), or a ModelError naming the option broken.

    ``steps`` None: :data:`DEFAULT_STEPS` for a decoder, none for another model; a number of
    steps or a prompt asked of a model that is no decoder is an error (never silently unused)."""
    if steps is not None and steps < 0:
        raise ModelError(f"--generate {steps}: the steps must be 0 (no generation) or more")
    if prompt_tokens is not None and prompt_tokens < 1:
        raise ModelError(f"--prompt-tokens {prompt_tokens}: the prompt must have a token or more")
    signature = decoder_signature(original)
    if signature is None:
        asked = [f"--generate {steps}"] if steps else []
        asked += [f"--prompt-tokens {prompt_tokens}"] if prompt_tokens is not None else []
        if asked:
            raise ModelError(
                f"{' and '.join(asked)}: {label} is not a decoder (a generation needs input_ids, "
                "logits and past -> present cache pairs)"
            )
        return None
    if steps == 0:
        if prompt_tokens is not None:
            raise ModelError(f"--prompt-tokens {prompt_tokens} applies with --generate 1 or more")
        return None
    return Generation(
        signature,
        DecoderFeeds.of(original, signature),
        DEFAULT_STEPS if steps is None else steps,
        DEFAULT_PROMPT_TOKENS if prompt_tokens is None else prompt_tokens,
    )


def fit(prompt_tokens: int, steps: int, max_positions: int | None) -> tuple[int, int, str]:
    """(prompt tokens, steps, how they were shortened or ""): the prompt and the steps within the
    model's positions (prompt + steps, the last step's token being the last position)."""
    if max_positions is None or prompt_tokens + steps <= max_positions:
        return prompt_tokens, steps, ""
    prompt = max(1, min(prompt_tokens, max_positions - steps))
    fitted = min(steps, max_positions - prompt)
    cut = [f"the prompt to {prompt} tokens"] if prompt != prompt_tokens else []
    cut += [f"the steps to {fitted}"] if fitted != steps else []
    text = (
        f"the model holds {max_positions} positions (its rotary or position table), fewer than "
        f"a prompt of {prompt_tokens} tokens and {steps} steps need: {' and '.join(cut)}"
    )
    return prompt, fitted, text


def run_generation(
    plan: Generation,
    original: Runner | Generated,
    rewritten: Runner | Generated,
    judge: Judge,
    *,
    seed: int = 0,
    logits_type: int | None = None,
    labels: tuple[str, str] = ("the original", "the rewritten model"),
    message: Callable[[BaseException], str] = str,
    tell: Tell | None = None,
) -> GenerationReport:
    """The prefill and ``plan.steps`` greedy steps on both models from a prompt of
    ``plan.prompt_tokens`` ids drawn from ``seed``, compared step by step; ``logits_type``: the
    logits' declared ONNX type; ``labels`` name the two models in errors. A side given as its
    :func:`generate_side` already ran (a caller that holds one model's session at a time)."""
    signature = plan.signature
    unfit = plan.feeds.unfit()
    if unfit is not None:
        return GenerationReport([], seed, judge.tolerance_of(signature.logits), skipped=unfit)
    sides = []
    for given, label, which in zip(
        (original, rewritten), labels, ("original", "rewritten"), strict=True
    ):
        if isinstance(given, Generated):
            sides.append(given)
            continue
        ran = generate_side(plan, given, seed=seed, label=label, message=message, tell=tell,
                            which=which)  # fmt: skip
        assert ran is not None  # fit: checked above
        sides.append(ran)
    first, second = sides
    report = GenerationReport(
        first.prompt, seed, judge.tolerance_of(signature.logits), capped=first.capped
    )
    for step, (want, got) in enumerate(zip(first.logits, second.logits, strict=True)):
        comparison = judge.compare(signature.logits, want, got, logits_type)
        report.steps.append(
            GenerationStep(
                step,
                first.tokens[step],
                second.tokens[step],
                comparison,
                first.tokens[:step] == second.tokens[:step],  # fed the same tokens so far
                judge.passes(comparison),
                _margin(want),
            )
        )
    return report


@dataclass(frozen=True)
class Generated:
    """One model's generation: the prompt, each step's logits and the token it chose."""

    prompt: list[int]
    logits: list[np.ndarray]
    tokens: list[int]
    capped: str


def generate_side(
    plan: Generation,
    run: Runner,
    *,
    seed: int = 0,
    label: str = "the original",
    message: Callable[[BaseException], str] = str,
    tell: Tell | None = None,
    which: str = "original",
) -> Generated | None:
    """One model's prefill and ``plan.steps`` greedy steps (each feeding its own token and
    cache back: what a side computes never depends on the other, so the two may run one after
    the other, one session alive at a time); None where no generation can be fed
    (``plan.feeds.unfit()``). ``which`` names the side to ``tell``."""
    signature, feeds = plan.signature, plan.feeds
    if feeds.unfit() is not None:
        return None
    prompt_tokens, steps, capped = fit(plan.prompt_tokens, plan.steps, signature.max_positions)
    prompt = feeds.prompt(prompt_tokens, seed)
    names = [signature.logits, *(pair.present for pair in signature.cache)]
    side = _Side(run, label, message)
    logits = []
    for step in range(steps + 1):
        if tell is not None:
            tell(which, step + 1, steps + 1)
        if step == 0:
            fed = feeds.prefill(prompt)
        else:
            fed = feeds.step(side.tokens[-1], prompt_tokens + step - 1, side.presents)
        logits.append(side.run(names, fed, step))
    return Generated(prompt, logits, side.tokens, capped)


class _Side:
    """One model generating: its tokens so far and the cache it returned last."""

    def __init__(self, run: Runner, label: str, message: Callable[[BaseException], str]) -> None:
        self._run = run
        self.label = label
        self._message = message
        self.tokens: list[int] = []
        self.presents: dict[str, np.ndarray] = {}

    def run(self, names: Sequence[str], feeds: Feeds, step: int) -> np.ndarray:
        """This step's logits; the token chosen and the cache are kept for the next step."""
        try:
            outputs = list(self._run(names, feeds))
        except Exception as error:
            where = "the prefill" if step == 0 else f"generation step {step}"
            raise ModelError(
                f"{self.label}: fails at {where} ({describe_feeds(feeds)}): {self._message(error)}"
            ) from None
        logits = np.asarray(outputs[0])
        self.tokens.append(int(np.argmax(logits.reshape(-1, logits.shape[-1])[-1])))
        self.presents = dict(zip(names[1:], outputs[1:], strict=True))
        return logits


def _margin(logits: np.ndarray) -> float:
    """The highest logit minus the second highest at the last position."""
    last = logits.reshape(-1, logits.shape[-1])[-1].astype(np.float64)
    if last.size < 2:
        return float("inf")
    top = np.partition(last, -2)[-2:]
    return float(top[1] - top[0])
