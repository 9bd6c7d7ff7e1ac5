"""onednn-backend tests (tests/onednn/): oneDNN's own Graph API run through quantgraph.

They skip, with the reason, when oneDNN or the kernel library is missing, except under CI
(``CI`` set), where `make test` installs both and a skip would hide a broken set-up.
"""

from __future__ import annotations
