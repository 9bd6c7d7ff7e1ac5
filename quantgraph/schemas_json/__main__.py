"""python -m quantgraph.schemas_json --write | --check (see the package's docstring)."""

import sys

from . import main

sys.exit(main(sys.argv[1:]))
