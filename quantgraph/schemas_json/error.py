"""Any command's --json output when it fails."""

from __future__ import annotations

from .common import STRING, Schema, closed_object

TITLE = "Any command's --json output when it fails (exit code 2; the same message is on stderr)."
BODY: Schema = closed_object({"error": STRING, "exit_code": {"type": "integer", "minimum": 1}})
