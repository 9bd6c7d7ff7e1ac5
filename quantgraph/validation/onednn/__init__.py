"""What oneDNN's arithmetic is checked against: the original evaluated in oneDNN's arithmetic,
and each oneDNN partition alone against the spec's composition of its ops."""
