"""``python -m quantgraph`` and the ``quantgraph`` console script: Ctrl-C is handled from the
start (:mod:`.interrupt`), before the command line's imports."""

from __future__ import annotations

from .interrupt import Interrupted, exit_interrupted, install_interrupt_handler


def main() -> None:
    install_interrupt_handler()
    try:
        from .cli import console_main
    except Interrupted:
        exit_interrupted()
    console_main()


if __name__ == "__main__":
    main()
