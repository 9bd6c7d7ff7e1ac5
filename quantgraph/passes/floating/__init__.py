"""Float models and float fallbacks: what counts as a model with nothing quantized, the places
a fallback acts on, and removing Q->DQ pairs to keep tensors or nodes in float."""
