"""Every --help lists every choice (issue 32, item 3): an option taking one of a set of values
names each of them in its help, from the registries (backends, arithmetics, fusion modes)."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from quantgraph.backends import ARITHMETICS, BACKENDS
from quantgraph.cli import main
from quantgraph.fusion.plan import MODES

# Options whose values are comma-separated lists of a registry's names (not click.Choice).
LISTS = {"--backends": BACKENDS, "--fusions": MODES}


def _named(text: str, choice: str) -> bool:
    """``choice`` as a word of ``text`` (not inside another: "onnx" in "onnxruntime")."""
    return re.search(rf"(?<![\w-]){re.escape(choice)}(?![\w-])", text) is not None


def _rendered(name: str) -> str:
    result = CliRunner().invoke(main, [name, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_choice_is_named_in_the_help(name: str) -> None:
    command = main.commands[name]
    rendered = _rendered(name)
    checked = 0
    for option in command.params:
        if not isinstance(option, click.Option):
            continue
        flag = option.opts[0]
        if isinstance(option.type, click.Choice):
            choices = tuple(str(c) for c in option.type.choices)
        elif flag in LISTS:
            choices = LISTS[flag]
        else:
            continue
        checked += 1
        text = " ".join((option.help or "").split())
        missing = [c for c in choices if not _named(text, c)]
        assert not missing, f"{name} {flag}: its help does not name {missing}"
        assert text in rendered  # what --help shows is that text
    takes = {p.opts[0] for p in command.params if isinstance(p, click.Option)}
    assert checked == len(takes & {"--backend", "--arithmetic", "--fusion", *LISTS})


def test_the_registries_are_what_the_options_offer() -> None:
    """The choices are the registries themselves: a new backend, arithmetic or fusion mode
    reaches every command's --help and its accepted values together."""
    offered: dict[str, set[tuple[str, ...]]] = {}
    for command in main.commands.values():
        for option in command.params:
            if isinstance(option, click.Option) and isinstance(option.type, click.Choice):
                offered.setdefault(option.opts[0], set()).add(tuple(option.type.choices))
    assert offered == {
        "--backend": {BACKENDS},
        "--arithmetic": {ARITHMETICS},
        "--fusion": {MODES},
    }
    run_help = _rendered("run")  # it described two of the four fusion modes
    for mode in MODES:
        assert f"{mode}: " in run_help, mode
