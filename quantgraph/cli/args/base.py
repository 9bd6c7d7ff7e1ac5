"""What every argument group is, as Polygraphy's ``tools/args``: a set of options of one concern,
declared once (in its module under args/), and the parsing that turns their values into one
object the command receives (:func:`parsed`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
G = TypeVar("G", bound="ArgGroup")


class GroupOption(click.Option):
    """A click option declared by an argument group: ``owner`` names the group (tests check that
    an option several commands take is one group's, defined once).

    ``comma_list``: the value is a comma-separated list, and the option may be repeated: every
    occurrence's items are taken, in order (click would keep the last one only)."""

    def __init__(self, *args: Any, owner: str, comma_list: bool = False, **kwargs: Any) -> None:
        if comma_list:
            kwargs["multiple"] = True
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.comma_list = comma_list

    def type_cast_value(self, ctx: click.Context, value: Any) -> Any:
        if not self.comma_list:
            return super().type_cast_value(ctx, value)
        # a default is one string; given values are one string per occurrence
        parts = [value] if isinstance(value, str) else [str(v) for v in value or ()]
        text = ",".join(part for part in parts if part.strip())
        return self.type.convert(text, self, ctx)


def group_option(owner: str, *decls: str, **attrs: Any) -> Callable[[F], F]:
    """``click.option`` for the group ``owner``."""
    return click.option(*decls, cls=GroupOption, owner=owner, **attrs)


def stacked(*options: Callable[[F], F]) -> Callable[[F], F]:
    """Several option decorators as one, listed (in help too) in the order given."""

    def decorate(function: F) -> F:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


@dataclasses.dataclass(frozen=True)
class ArgGroup:
    """A group's parsed values: one field per option (named as the option's parameter), each with
    the default a command gets when it does not take that option."""

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def parse(cls: type[G], values: dict[str, Any]) -> G:
        """The group from its options' values (those the command takes); groups whose values
        need more than click's types check override it."""
        return cls(**values)


def parsed(**groups: type[ArgGroup]) -> Callable[[F], F]:
    """Give the command one parsed object per group (``keyword=Group``) in place of that group's
    option values, as Polygraphy hands a tool the groups it subscribes to."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for keyword, group in groups.items():
                values = {name: kwargs.pop(name) for name in group.fields() if name in kwargs}
                kwargs[keyword] = group.parse(values)
            return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def refuse_given(names: tuple[str, ...], rule: str) -> None:
    """A usage error when any of the options ``names`` was given on the command line (an option
    that would be ignored is an error, never silence)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name in names
        and ctx.get_parameter_source(param.name) not in (None, ParameterSource.DEFAULT)
    ]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise click.UsageError(f"{', '.join(given)} {verb} {rule}")
