"""Names that differ only in their numbers, told once: a decoder's 44 ``past_key_values.N.key``
and ``.value`` inputs that share a description print as one ``past_key_values.*.{key,value}``
item (44 inputs) instead of 44 lines, in text and one-line errors alike; ``--json`` lists every
name."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)

NUMBER = re.compile(r"\d+")
WORD = re.compile(r"(\w+)")
# Fewer names than this under one pattern are listed by name (two names read as well as one
# pattern, and say more).
LEAST = 3


@dataclass(frozen=True)
class Group(Generic[Key]):
    """Names that share ``key`` (what is said of each): ``label`` is the one name, or the
    pattern they share (numbers as ``*``, words that differ as ``{a,b}``)."""

    label: str
    names: tuple[str, ...]
    key: Key

    @property
    def count(self) -> str:
        """`` (44 inputs)`` after a pattern; nothing after a name."""
        return f" ({len(self.names)} inputs)" if len(self.names) > 1 else ""


def grouped(items: Iterable[tuple[str, Key]]) -> list[Group[Key]]:
    """``(name, key)`` pairs as groups, in the order of each group's first name: names whose
    numbers are all that differs and whose keys are equal are one group, and such groups with
    equal keys whose patterns differ in one word only are one (``past_key_values.*.key`` and
    ``.value``: ``past_key_values.*.{key,value}``), when that makes at least :data:`LEAST` names.
    Every other name is a group of its own."""
    by_pattern: dict[tuple[str, Key], list[str]] = {}
    for name, key in items:
        by_pattern.setdefault((NUMBER.sub("*", name), key), []).append(name)
    # Each group to be, in order: its key, the text around its one word that may differ, and
    # that word with its names per pattern merged in (a name alone: the name as its word).
    slots: dict[tuple[object, ...], tuple[Key, str, str, list[tuple[str, list[str]]]]] = {}
    for (pattern, key), names in by_pattern.items():
        if len(names) == 1:
            slots[("name", names[0], key)] = (key, "", "", [(names[0], names)])
            continue
        tokens = WORD.split(pattern)  # words at odd places, what separates them at even ones
        words = [i for i in range(1, len(tokens), 2) if "*" not in tokens[i]]
        place = words[-1] if words else None  # the part of a name that differs (key/value)
        if place is None:
            slots[("pattern", pattern, key)] = (key, "", "", [(pattern, names)])
            continue
        before, after = "".join(tokens[:place]), "".join(tokens[place + 1 :])
        slot = slots.setdefault(("around", before, after, key), (key, before, after, []))
        slot[3].append((tokens[place], names))
    found: list[Group[Key]] = []
    for key, before, after, members in slots.values():
        if sum(len(each) for _, each in members) < LEAST:
            found += [Group(name, (name,), key) for _, each in members for name in each]
            continue
        alternatives = [word for word, _ in members]
        word = alternatives[0] if len(members) == 1 else "{" + ",".join(alternatives) + "}"
        every = tuple(name for _, each in members for name in each)
        found.append(Group(f"{before}{word}{after}", every, key))
    return found


def described_once(items: Iterable[tuple[str, str]]) -> str:
    """``name: description`` pairs on one line, a group of alike names as one item:
    ``input_ids: int64[1,128], past_key_values.*.{key,value}: float32[1,4,0,64] (44 inputs)``."""
    return ", ".join(f"{g.label}: {g.key}{g.count}" for g in grouped(items))


def names_once(names: Iterable[str], quote: str = "") -> str:
    """Names on one line, a group of alike names as one item (each in ``quote``)."""
    return ", ".join(f"{quote}{g.label}{quote}{g.count}" for g in grouped((n, "") for n in names))
