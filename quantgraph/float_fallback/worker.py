"""A local evaluation worker: ``python -m quantgraph.float_fallback.worker PROBLEM`` reads a
pickled :class:`~.problem.FallbackProblem`, then answers each JSON list of candidate names on
stdin with ``{"quality": q}`` (or ``{"error": "..."}``) on stdout, until stdin closes."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path


def main(path: str) -> int:
    problem = pickle.loads(Path(path).read_bytes())  # written by our own parent process
    for line in sys.stdin:
        try:
            quality = problem.quality(frozenset(json.loads(line)))
            answer: dict[str, object] = {"quality": quality}
        except Exception as error:  # the parent names it in one line
            answer = {"error": " ".join(str(error).split())[:300] or type(error).__name__}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
