"""The command line's shape (issue 22, item 3): a module per command of at most 250 lines, and
every option defined once, by the argument group (quantgraph/cli/args/) that parses it."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import click

import quantgraph.cli
from quantgraph.cli import args as arg_groups
from quantgraph.cli import main
from quantgraph.cli.args import ArgGroup, GroupOption

CLI = Path(quantgraph.cli.__file__).parent
COMMANDS = ("bench", "convert", "fallback", "inspect", "lower", "run", "tune", "validate")
MAX_COMMAND_LINES = 250
RENDERERS = ("render_json", "render_text")


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


def test_each_command_is_its_own_small_module() -> None:
    assert sorted(main.commands) == sorted(COMMANDS)
    modules = {}
    for name, command in main.commands.items():
        module = sys.modules[command.callback.__module__]
        path = Path(module.__file__ or "")
        assert path.parent == CLI and path.stem == name, (name, path)
        modules[name] = path
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_COMMAND_LINES, f"{path.name}: {lines} lines > {MAX_COMMAND_LINES}"
    assert len(set(modules.values())) == len(COMMANDS)


def test_an_option_several_commands_take_is_one_groups() -> None:
    """--force, --inputs, --backend, ... : the same group's option in every command (its help
    may say what it does there), never a second definition in a command module."""
    owners: dict[str, set[str]] = defaultdict(set)
    users: dict[str, list[str]] = defaultdict(list)
    for name, command in main.commands.items():
        for option in _options(command):
            flag = option.opts[0]
            users[flag].append(name)
            owners[flag].add(option.owner if isinstance(option, GroupOption) else f"{name}.py")
    shared = {flag: commands for flag, commands in users.items() if len(commands) > 1}
    assert "--force" in shared and "--backend" in shared  # the check sees shared options
    for flag in shared:
        assert len(owners[flag]) == 1, (flag, owners[flag])
        assert not next(iter(owners[flag])).endswith(".py"), (flag, "defined in a command")


def test_every_option_is_declared_once_in_the_source() -> None:
    """No option string is declared by two calls anywhere in quantgraph/cli (a group's option
    with per-command help is one declaration with its texts beside it)."""
    declared: dict[str, list[str]] = defaultdict(list)
    for path in sorted(CLI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in ("option", "group_option", "Option"):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                    declared[str(arg.value)].append(f"{path.relative_to(CLI)}:{node.lineno}")
                    break
    assert "--dim" in declared and "--weights" in declared
    twice = {flag: where for flag, where in declared.items() if len(where) > 1}
    assert not twice, twice


def test_a_group_parses_every_option_it_declares() -> None:
    """Each group option reaches its command through the group's parsed object: its parameter
    name is one of the group's fields (--json and --verbose, the renderers' switches, are the
    plain values)."""
    groups = {
        name: getattr(arg_groups, name)
        for name in arg_groups.__all__
        if isinstance(getattr(arg_groups, name), type)
        and issubclass(getattr(arg_groups, name), ArgGroup)
        and name != "ArgGroup"
    }
    assert len(groups) >= 4
    for command in main.commands.values():
        for option in _options(command):
            if not isinstance(option, GroupOption) or option.owner in RENDERERS:
                continue
            assert option.owner in groups, option.owner
            assert option.name in groups[option.owner].fields(), (option.owner, option.name)
