"""The page's "Generation" section: a decoder's greedy generation on both models, one row per
step (the tokens each chose, how far the logits were apart and how that is judged), the step
where the tokens part marked."""

from __future__ import annotations

import math
from html import escape

from ..generation.generation_report import NOTE, GenerationReport, GenerationStep


def section(found: GenerationReport | None) -> str:
    if found is None:
        return ""
    head = "<h2 id='generation'>Generation</h2>"
    verdict = f"<p id='generation-verdict'>{escape(found.verdict())}</p>"
    if found.skipped is not None:
        return head + verdict
    about = (
        f"A prompt of {len(found.prompt)} token ids (seed {found.seed}): "
        f"{escape(' '.join(map(str, found.prompt)))}. {escape(NOTE[0].upper() + NOTE[1:])}."
    )
    if found.capped:
        about += f" Capped: {escape(found.capped)}."
    exact = found.tolerance is None
    rows = "".join(_row(step, exact, step.step == found.first_divergence) for step in found.steps)
    table = (
        "<div class='wide'><table id='generation-steps'><tr><th>step</th><th>original</th>"
        "<th>rewritten</th><th>logits</th><th>max abs diff</th><th>mismatches</th>"
        "<th>original's margin</th></tr>" + rows + "</table></div>"
    )
    return head + verdict + f"<p class='muted'>{about}</p>" + table


def _row(step: GenerationStep, exact: bool, parts: bool) -> str:
    if not step.judged:
        judged = "<span class='muted'>not judged (fed other tokens)</span>"
    elif step.logits.agree:
        judged = "<span class='ok'>identical</span>"
    elif step.passes and not exact:
        judged = "<span class='ok'>within tolerance</span>"
    else:
        judged = f"<span class='bad'>{'different' if exact else 'beyond tolerance'}</span>"
    token = f"<b class='bad'>{step.token_rewritten}</b>" if parts else str(step.token_rewritten)
    name = "prefill" if step.step == 0 else str(step.step)
    logits = step.logits
    cells = (
        f"<td>{name}</td><td class='num'>{step.token_original}</td><td class='num'>{token}</td>"
        f"<td>{judged}</td><td class='num'>{_num(logits.max_abs_diff)}</td>"
        f"<td class='num'>{logits.mismatches:,} / {logits.elements:,}</td>"
        f"<td class='num'>{_num(step.margin)}</td>"
    )
    # marked in place (the page's stylesheet is shared by every report)
    mark = " class='parts' style='background:#fdecea' title='the tokens part here'" if parts else ""
    return f"<tr{mark}>{cells}</tr>"


def _num(value: float) -> str:
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:.4g}"
