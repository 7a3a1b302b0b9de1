"""The Spark sink's default message ids (issue 36): made from what a row is, never from where it sits.

No Spark session and no server: :class:`MessageIds` and :func:`row_digest` are plain functions of a row. The
replay tests model the stream's deduplication as "an id already stored is dropped" and check the property the
sink promises: a replay, in any order and partitioning, never loses a row the first attempt did not store.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from jetstream_sync import errors
from jetstream_sync.integrations.spark.options import ConnectionOptions, WriteOptions
from jetstream_sync.integrations.spark.writing import MessageIds, plan_columns, row_digest

Row = tuple[str, bytes, "dict[str, list[str]] | None", "str | None", "int | None"]

SCOPE = "0f7c3c1e-9d3b-4c1e-8f0e-3a2b1c0d9e8f:17:3"
ID = re.compile(r"^(?P<head>.+):(?P<digest>[A-Za-z0-9_-]{22}):(?P<k>\d+)$")


def ids_of(rows: Sequence[Row], scope: str = SCOPE) -> list[str]:
    make = MessageIds(scope)
    return [make(subject, data, headers, stream, seq) for subject, data, headers, stream, seq in rows]


def plain(i: int) -> Row:
    return ("orders.copy", b"m%d" % i, None, None, None)


def sourced(i: int, stream: str = "ORDERS", part: int = 0) -> Row:
    """A row made from message ``i + 1`` of ``stream``; ``part`` tells apart rows made from one message."""
    return ("orders.copy", b"s%d-%d" % (i, part), None, stream, i + 1)


# -- the shape of an id -------------------------------------------------------------------------------------------


def test_a_scoped_id_is_scope_digest_and_count() -> None:
    (msg_id,) = ids_of([plain(1)])
    match = ID.match(msg_id)
    assert match is not None, msg_id
    assert match["head"] == SCOPE
    assert match["k"] == "0"


def test_a_sourced_id_starts_with_the_source_stream_and_sequence_and_has_no_scope() -> None:
    (first,) = ids_of([sourced(4)], scope="query-a:1:0")
    (again,) = ids_of([sourced(4)], scope="query-b:9:5")  # another query, batch and partition: the same id
    assert first == again
    assert first.startswith("ORDERS:5:")
    assert ID.match(first) is not None


def test_a_null_stream_or_seq_falls_back_to_the_scoped_id() -> None:
    rows: list[Row] = [("s", b"x", None, None, 3), ("s", b"x", None, "ORDERS", None)]
    assert all(i.startswith(SCOPE + ":") for i in ids_of(rows))


def test_ids_stay_short_and_header_safe() -> None:
    longest_stream = "S" * 255  # the server's limit on stream names
    (msg_id,) = ids_of([("s", b"x" * 10_000, None, longest_stream, 2**63 - 1)])
    assert len(msg_id) <= 255 + 1 + 19 + 1 + 22 + 1 + 20
    assert re.fullmatch(r"[A-Za-z0-9_:\-]+", msg_id)


# -- what makes two rows the same ---------------------------------------------------------------------------------


def test_the_digest_covers_subject_headers_and_payload() -> None:
    base = row_digest("a.b", b"payload", {"K": ["1"]})
    assert row_digest("a.b", b"payload", {"K": ["1"]}) == base
    assert row_digest("a.c", b"payload", {"K": ["1"]}) != base
    assert row_digest("a.b", b"payloae", {"K": ["1"]}) != base
    assert row_digest("a.b", b"payload", {"K": ["2"]}) != base
    assert row_digest("a.b", b"payload", {"k": ["1"]}) != base  # published as written: the case is data
    assert row_digest("a.b", b"payload", None) != base
    assert row_digest("a.b", b"payload", {"K": ["1"]}, ("ORDERS", 1)) != base


def test_header_names_are_sorted_but_the_values_of_one_header_keep_their_order() -> None:
    assert row_digest("s", b"", {"A": ["1"], "B": ["2"]}) == row_digest("s", b"", {"B": ["2"], "A": ["1"]})
    assert row_digest("s", b"", {"A": ["1", "2"]}) != row_digest("s", b"", {"A": ["2", "1"]})


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("ab", b"c", None), ("a", b"bc", None)),  # subject and payload boundary
        (("s", b"", {"A": ["bc"]}), ("s", b"", {"Ab": ["c"]})),  # header name and value boundary
        (("s", b"", {"A": ["b", "c"]}), ("s", b"", {"A": ["bc"]})),  # two values or one
        (("s", b"", {"A": ["1"], "B": ["2"]}), ("s", b"", {"A": ["1", "B"]})),  # a value looking like a name
        (("s", b"", None), ("s", b"", {})),  # (no headers publishes the same bytes as empty headers)
    ],
)
def test_the_encoding_is_unambiguous(one: tuple[Any, ...], other: tuple[Any, ...]) -> None:
    if one[2] is None and other[2] == {}:
        assert row_digest(*one) == row_digest(*other)
    else:
        assert row_digest(*one) != row_digest(*other)


def test_source_stream_and_sequence_are_framed() -> None:
    assert row_digest("s", b"", None, ("AB", 12)) != row_digest("s", b"", None, ("AB1", 2))


# -- identical rows -----------------------------------------------------------------------------------------------


def test_identical_rows_are_counted_and_distinct_rows_share_no_id() -> None:
    rows = [plain(1), plain(2), plain(1), plain(1), plain(2)]
    made = ids_of(rows)
    assert len(set(made)) == len(rows)
    counts = [ID.match(i)["k"] for i in made]  # type: ignore[index]
    assert counts == ["0", "0", "1", "2", "1"]


def test_the_ids_of_a_partition_do_not_depend_on_the_order_of_its_rows() -> None:
    rows = [plain(i % 7) for i in range(50)] + [sourced(i % 5) for i in range(30)]
    shuffled = rows[:]
    random.Random(36).shuffle(shuffled)
    assert Counter(ids_of(rows)) == Counter(ids_of(shuffled))


# -- the replay property ------------------------------------------------------------------------------------------


def replay(
    rows: Sequence[Row], first: Sequence[Sequence[Row]], second: Sequence[Sequence[Row]], stored_fraction: float
) -> Counter[tuple[str, bytes]]:
    """Attempt 1 publishes a prefix of each partition in ``first``, attempt 2 all of ``second``; the stream
    drops an id it already holds. Returns the stored rows (subject, payload) with their counts."""
    stored: dict[str, tuple[str, bytes]] = {}
    for attempt, partitions in enumerate((first, second)):
        for index, partition in enumerate(partitions):
            made = ids_of(partition, scope=f"q:7:{index}")
            keep = len(partition) if attempt else int(len(partition) * stored_fraction)
            for msg_id, row in list(zip(made, partition, strict=True))[:keep]:
                stored.setdefault(msg_id, (row[0], row[1]))
    return Counter(stored.values())


def split(rows: Sequence[Row], partitions: int, rng: random.Random) -> list[list[Row]]:
    shuffled = list(rows)
    rng.shuffle(shuffled)
    return [shuffled[i::partitions] for i in range(partitions)]


@pytest.mark.parametrize("seed", range(30))
def test_a_replay_in_any_order_and_partitioning_stores_every_row(seed: int) -> None:
    rng = random.Random(seed)
    rows = [plain(rng.randrange(40)) for _ in range(150)]  # repeats, as many as chance makes
    rows += [sourced(i, part=j) for i in range(40) for j in range(rng.randint(1, 3))]  # several per message
    wanted = Counter((r[0], r[1]) for r in rows)
    first = split(rows, rng.randint(1, 4), rng)
    second = split(rows, rng.randint(1, 4), rng)
    stored = replay(rows, first, second, rng.random())
    for row, count in wanted.items():
        assert stored[row] >= count, f"{row}: {stored[row]} stored, {count} wanted"


@pytest.mark.parametrize("seed", range(10))
def test_a_replay_in_the_same_partitions_in_another_order_stores_nothing_twice(seed: int) -> None:
    rng = random.Random(seed)
    rows = [plain(rng.randrange(30)) for _ in range(120)]
    first = split(rows, 3, rng)
    second = [rng.sample(p, len(p)) for p in first]
    assert replay(rows, first, second, rng.random()) == Counter((r[0], r[1]) for r in rows)


def test_sourced_rows_replayed_in_another_partitioning_are_stored_once() -> None:
    rng = random.Random(5)
    rows = [sourced(i) for i in range(100)]
    stored = replay(rows, split(rows, 2, rng), split(rows, 3, rng), 0.6)
    assert stored == Counter((r[0], r[1]) for r in rows)


def test_identical_rows_from_one_source_message_count_once_across_partitions() -> None:
    """The documented limit of source-keyed ids: rows identical in every published byte, made from one
    source message, are one message when they land in different partitions (in one partition they are
    counted apart). No id can tell them apart without their position, and position is what a replay changes;
    drop the stream/seq columns for such a write (scoped ids keep them: a replay in another partitioning then
    stores rows twice instead)."""
    twin = sourced(3)
    assert replay([twin, twin], [[twin, twin]], [[twin, twin]], 1.0)[(twin[0], twin[1])] == 2
    assert replay([twin, twin], [[twin], [twin]], [[twin], [twin]], 1.0)[(twin[0], twin[1])] == 1
    scoped = ("orders.copy", twin[1], None, None, None)
    assert replay([scoped] * 2, [[scoped], [scoped]], [[scoped], [scoped]], 1.0)[(twin[0], twin[1])] == 2


def test_row_numbered_ids_lost_rows_on_a_reordered_replay() -> None:
    """The pre-issue-36 scheme, modelled: ids by row number lose the rows the replay moved."""
    rows = [plain(i) for i in range(10)]
    stored: dict[str, bytes] = {}
    for i, row in enumerate(rows[:5]):  # attempt 1 stores half, then fails
        stored.setdefault(f"q:7:0:{i}", row[1])
    for i, row in enumerate(reversed(rows)):  # the replay sees the rows reversed
        stored.setdefault(f"q:7:0:{i}", row[1])
    assert len(set(stored.values())) == 5  # m5..m9 were never stored: what MessageIds fixes


# -- columns ------------------------------------------------------------------------------------------------------


def options(**kwargs: object) -> WriteOptions:
    return WriteOptions(connection=ConnectionOptions(servers=("nats://127.0.0.1:4222",)), **kwargs)  # type: ignore[arg-type]


def test_the_source_columns_key_the_ids_when_both_have_source_types() -> None:
    plan = plan_columns({"subject": "string", "data": "binary", "Stream": "string", "SEQ": "bigint"}, options())
    assert (plan.stream, plan.seq) == ("Stream", "SEQ")


@pytest.mark.parametrize(
    "fields",
    [
        {"stream": "string"},
        {"seq": "bigint"},
        {"stream": "string", "seq": "string"},
        {"stream": "binary", "seq": "bigint"},
    ],
)
def test_without_both_source_columns_the_ids_are_scoped(fields: dict[str, str]) -> None:
    plan = plan_columns({"subject": "string", "data": "binary", **fields}, options())
    assert (plan.stream, plan.seq) == (None, None)


def test_msg_id_column_and_idempotent_false_use_no_source_columns() -> None:
    fields = {"subject": "string", "data": "binary", "stream": "string", "seq": "bigint", "key": "string"}
    assert plan_columns(fields, options(msg_id_column="key")).stream is None
    assert plan_columns(fields, options(idempotent=False)).stream is None
    with pytest.raises(errors.InvalidArgumentError, match="idempotent"):
        plan_columns(fields, options(msg_id_column="key", idempotent=False))
