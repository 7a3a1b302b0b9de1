"""ConsumeFill's fill figure (no server): the fuller of its two bounds, capped at 1."""

from __future__ import annotations

import pytest

from jetstream_sync import ConsumeFill


def fill(held: int, held_bytes: int, max_messages: int, max_bytes: int) -> float:
    return ConsumeFill(
        label="S/c",
        kind="pull",
        held_messages=held,
        held_bytes=held_bytes,
        max_messages=max_messages,
        max_bytes=max_bytes,
        delivered=0,
    ).fill


def test_fill_is_held_against_the_message_bound_without_a_byte_bound():
    assert fill(49, 10_000, 50, 0) == pytest.approx(0.98)


def test_fill_is_the_fuller_of_the_two_bounds():
    assert fill(10, 900, 100, 1000) == pytest.approx(0.9)
    assert fill(90, 100, 100, 1000) == pytest.approx(0.9)


def test_fill_is_at_most_one_and_zero_when_unbounded():
    assert fill(600, 0, 500, 0) == 1.0  # a push consume over its limit drops what comes next
    assert fill(5, 5, 0, 0) == 0.0
