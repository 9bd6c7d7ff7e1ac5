"""What a greedy generation on both models found (:mod:`quantgraph.validation.generation.greedy`),
for people (the text, the page) and machines (``to_dict``, ``validate --json``'s ``generation``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...reference.compare import TensorComparison

NOTE = (
    "each model generates on its own: the prefill takes the prompt with an empty cache, each "
    "later step feeds that model's own argmax token and its own present outputs back as past; "
    "the logits of a step are judged as the outputs are, while both models have been fed the "
    "same tokens; once the tokens part, later steps continue different texts and are shown, "
    "not judged"
)


@dataclass(frozen=True)
class GenerationStep:
    """One step: 0 is the prefill (the prompt), step k > 0 feeds the token step k-1 chose.

    ``logits``: this step's logits compared as the report compares an output; ``judged``: both
    models were fed the same tokens up to this step, so the comparison counts for the verdict;
    ``passes``: the report's rule on ``logits``; ``margin``: the original's highest logit minus
    its second highest at the last position (how near a tie its choice was)."""

    step: int
    token_original: int
    token_rewritten: int
    logits: TensorComparison
    judged: bool
    passes: bool
    margin: float

    @property
    def same_token(self) -> bool:
        return self.token_original == self.token_rewritten

    @property
    def agree(self) -> bool:
        """Same token, logits alike by the report's rule."""
        return self.same_token and self.passes

    def to_dict(self) -> dict[str, object]:
        return {
            "step": self.step,
            "token_original": self.token_original,
            "token_rewritten": self.token_rewritten,
            "same_token": self.same_token,
            "logits": self.logits.to_dict(),
            "judged": self.judged,
            "agree": self.agree,
            "margin": self.margin,
        }


@dataclass
class GenerationReport:
    """A greedy generation of ``steps`` tokens after a prefill of ``prompt``, on both models.

    ``tolerance``: the report's (None: exact). ``skipped``: why no generation ran although the
    original is a decoder (then ``steps`` is empty). ``capped``: how the prompt or the steps were
    shortened to fit the model's positions, else ""."""

    prompt: list[int]
    seed: int
    tolerance: tuple[float, float] | None
    steps: list[GenerationStep] = field(default_factory=list)
    skipped: str | None = None
    capped: str = ""

    @property
    def first_divergence(self) -> int | None:
        """The first step whose tokens differ, or None."""
        return next((s.step for s in self.steps if not s.same_token), None)

    @property
    def same_tokens(self) -> int:
        return sum(s.same_token for s in self.steps)

    @property
    def judged(self) -> list[GenerationStep]:
        return [s for s in self.steps if s.judged]

    @property
    def logits_max_abs_diff(self) -> float:
        """Over the judged steps (later ones continue different texts)."""
        return max((s.logits.max_abs_diff for s in self.judged), default=0.0)

    @property
    def first_failing(self) -> int | None:
        """The first judged step whose logits the report's rule rejects, or None."""
        return next((s.step for s in self.judged if not s.passes), None)

    @property
    def agree(self) -> bool:
        """Every judged step's logits pass the report's rule. Tokens that part where the logits
        still pass (a near tie within the tolerance) do not fail it: the judged steps end there."""
        return self.first_failing is None

    def verdict(self) -> str:
        """One line: how many steps chose the same token, how far the logits were apart."""
        if self.skipped is not None:
            return f"generation: not run: {self.skipped}"
        total = len(self.steps)
        line = (
            f"generation: prefill + {total - 1} steps, {self.same_tokens} of {total} choose the "
            "same token"
        )
        part = self.first_divergence
        if part is not None:
            step = self.steps[part]
            line += (
                f"; the tokens part at step {part} (original {step.token_original}, rewritten "
                f"{step.token_rewritten})"
            )
        judged = self.judged
        exact = self.tolerance is None
        how = "identical" if exact else "within tolerance"
        failing = self.first_failing
        if failing is None:
            alike = all(s.logits.agree for s in judged)
            where = f"{'identical' if alike else how} at every step"
            if len(judged) < total:
                where += f" of the {len(judged)} fed the same tokens"
        else:
            where = f"{'DIFFERENT' if exact else 'BEYOND tolerance'} from step {failing}"
        return f"{line}; logits max_abs_diff {self.logits_max_abs_diff:g} ({where})"

    def to_dict(self) -> dict[str, object]:
        atol, rtol = self.tolerance if self.tolerance is not None else (None, None)
        return {
            "agree": self.agree,
            "skipped": self.skipped,
            "note": NOTE,
            "capped": self.capped or None,
            "seed": self.seed,
            "prompt_tokens": len(self.prompt),
            "prompt": list(self.prompt),
            "steps_run": len(self.steps),
            "exact_expected": self.tolerance is None,
            "atol": atol,
            "rtol": rtol,
            "tokens_original": [s.token_original for s in self.steps],
            "tokens_rewritten": [s.token_rewritten for s in self.steps],
            "same_tokens": self.same_tokens,
            "first_divergence": self.first_divergence,
            "first_failing": self.first_failing,
            "logits_max_abs_diff": self.logits_max_abs_diff,
            "verdict": self.verdict(),
            "steps": [s.to_dict() for s in self.steps],
        }
