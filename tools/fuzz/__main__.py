"""``python -m tools.fuzz``: the differential fuzzer's command line."""

from tools.fuzz import main

raise SystemExit(main())
