"""The oneDNN engine: the main graph described to oneDNN Graph, the partitions it forms and the
library that compiles and runs them."""
