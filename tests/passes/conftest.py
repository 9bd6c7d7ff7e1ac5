"""One test file per graph pass (tests/passes/). tests/ is a package: the shared helpers are
imported as ``tests.builders`` (pytest puts the repository's root on sys.path)."""
