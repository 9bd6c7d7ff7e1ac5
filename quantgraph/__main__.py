"""``python -m quantgraph``: the same command line as the ``quantgraph`` script."""

from .cli import console_main

console_main()
