"""The smallest float fallback that reaches a quality target (issue #43), a layer above validation,
which it runs many times: candidates (:mod:`quantgraph.passes.floating.float_candidates`) ranked
by the error each introduces, the search (:mod:`.search`) on a runner (:mod:`.runners`: this
process, local workers, a Ray cluster), each point priced with fusion auto (:mod:`.find`), and
the page (:mod:`.page`)."""

from .find import FallbackResult, RankedCandidate, fallback
from .search import Point, SearchResult, Target

__all__ = ["FallbackResult", "Point", "RankedCandidate", "SearchResult", "Target", "fallback"]
