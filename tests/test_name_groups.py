"""Names alike but for their numbers told once (quantgraph/ir/name_groups.py): what validate's
and tune's text group, and what they keep apart."""

from __future__ import annotations

from quantgraph.ir.name_groups import grouped


def _labels(items: list[tuple[str, object]]) -> list[str]:
    return [f"{group.label}{group.count}" for group in grouped(items)]


def test_a_cache_alike_in_all_but_its_numbers_is_one_group_of_every_name() -> None:
    cache = [(f"past_key_values.{n}.{part}", "same") for n in range(22) for part in ("key", "val")]
    groups = grouped([("input_ids", "ids"), *cache, ("attention_mask", "mask")])
    assert [g.label for g in groups] == [
        "input_ids",
        "past_key_values.*.{key,val}",
        "attention_mask",
    ]
    assert sorted(groups[1].names) == sorted(name for name, _ in cache)
    assert groups[1].count == " (44 inputs)" and groups[0].count == ""


def test_what_is_said_of_each_keeps_groups_apart() -> None:
    items: list[tuple[str, object]] = [(f"past.{n}.key", "a") for n in range(3)]
    items += [(f"past.{n}.value", "b") for n in range(3)]  # another description: not merged
    items += [("past.3.key", "c")]  # one layer apart from the rest: by its name
    assert _labels(items) == ["past.*.key (3 inputs)", "past.*.value (3 inputs)", "past.3.key"]


def test_two_names_are_listed_and_words_other_than_the_last_are_not_merged() -> None:
    assert _labels([("x1", 0), ("x2", 0), ("y", 0)]) == ["x1", "x2", "y"]
    items: list[tuple[str, object]] = [(f"encoder.{n}.out", 0) for n in range(3)]
    items += [(f"decoder.{n}.out", 0) for n in range(3)]
    assert _labels(items) == ["encoder.*.out (3 inputs)", "decoder.*.out (3 inputs)"]
