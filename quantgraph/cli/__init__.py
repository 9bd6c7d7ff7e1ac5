"""quantgraph command line: convert, lower, validate, run, inspect, bench.

Only the command line (this package) knows about terminals, exit codes and JSON printing:
app.py holds the group, one module per command, args/ the argument groups (each owns its options
and their parsing), process.py how a command ends, render_text.py and render_json.py what it prints.
Exit codes: 0 success (validate: the models agree), 1 validate found a disagreement,
2 an error (one line on stderr; --debug shows the traceback), 130 interrupted.
"""

from __future__ import annotations

from .app import console_main, main

__all__ = ["console_main", "main"]
