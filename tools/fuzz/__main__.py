"""``python -m tools.fuzz``: the differential fuzzer's command line."""

from tools.fuzz.cli import main

raise SystemExit(main())
