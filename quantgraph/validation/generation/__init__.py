"""A decoder validated the way decoders are used: a short greedy generation on both models,
its feeds and what it found."""
