"""A partitioned group's config is checked before anything is sent: typed errors naming the field at fault."""

from __future__ import annotations

import pytest

from jetstream_sync import ElasticGroupConfig, MemberMapping, PartitioningFilter, StaticGroupConfig, errors


def mapped(*pairs: tuple[str, list[int]]) -> list[MemberMapping]:
    return [MemberMapping(member=m, partitions=p) for m, p in pairs]


@pytest.mark.parametrize("kind", [StaticGroupConfig, ElasticGroupConfig])
@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"max_members": 0}, "max_members", "must be >= 1, got 0"),
        ({"max_members": -3}, "max_members", "must be >= 1, got -3"),
        ({"max_members": 2, "members": ["a.b"]}, "members", "'a.b' contains '.'"),
        ({"max_members": 2, "members": ["a b"]}, "members", "contains ' '"),
        ({"max_members": 2, "members": ["*"]}, "members", "contains '*'"),
        ({"max_members": 2, "members": [""]}, "members", "must not be empty"),
        (
            {"max_members": 2, "members": ["a"], "member_mappings": mapped(("a", [0, 1]))},
            "members",
            "either members or member_mappings, not both",
        ),
        (
            {"max_members": 4, "member_mappings": mapped(("a", [0, 1]), ("b", [2]))},
            "member_mappings",
            "must cover every partition 0..3; missing [3]",
        ),
        (
            {"max_members": 2, "member_mappings": mapped(("a", [0, 2]), ("b", [1]))},
            "member_mappings",
            "partition 2 is not between 0 and 1",
        ),
        (
            {"max_members": 2, "member_mappings": mapped(("a", [0, 1]), ("b", [1]))},
            "member_mappings",
            "partition 1 is given to both 'a' and 'b'",
        ),
        (
            {"max_members": 2, "member_mappings": mapped(("a", [0]), ("a", [1]))},
            "member_mappings",
            "member 'a' is mapped twice",
        ),
        (
            {"max_members": 2, "member_mappings": mapped(("a", [0]), ("b", [1]), ("c", []))},
            "member_mappings",
            "3 mappings for 2 partitions",
        ),
    ],
)
def test_membership_rules(kind, fields, field, says):
    with pytest.raises(errors.InvalidArgumentError) as raised:
        kind(**fields).check()
    assert raised.value.field == field
    assert says in str(raised.value)


def test_a_mapping_names_a_valid_member():
    with pytest.raises(errors.InvalidArgumentError, match="contains '>'"):
        MemberMapping(member="a>", partitions=[0])


@pytest.mark.parametrize("kind", [StaticGroupConfig, ElasticGroupConfig])
def test_types_are_checked(kind):
    with pytest.raises(errors.InvalidTypeError, match="max_members: must be an int, got str"):
        kind(max_members="3").check()
    with pytest.raises(errors.InvalidTypeError, match="members: must be a list of str, got str"):
        kind(max_members=3, members="abc")
    with pytest.raises(errors.InvalidTypeError, match="partitions: must hold ints"):
        MemberMapping(member="a", partitions=["0"])


@pytest.mark.parametrize(
    ("subject_filter", "wildcards", "says"),
    [
        ("", [], "must not be empty"),
        ("orders.eu", [], "must hold at least one '*' wildcard or end with '>'"),
        ("orders.*", [1, 2], "has 1 '*' wildcard(s), fewer than the 2 indexes given"),
        ("orders.*.*", [2, 2], "must be unique"),
        ("orders.*.*", [3], "index 3 is not between 1 and 2"),
        ("orders.*.*", [0], "index 0 is not between 1 and 2"),
    ],
)
def test_partitioning_filter_rules(subject_filter, wildcards, says):
    config = ElasticGroupConfig(
        max_members=4,
        partitioning_filters=[PartitioningFilter(filter=subject_filter, partitioning_wildcards=wildcards)],
    )
    with pytest.raises(errors.InvalidArgumentError, match="partitioning_filters") as raised:
        config.check()
    assert says in str(raised.value)


def test_buffer_limits_are_not_negative():
    with pytest.raises(errors.InvalidArgumentError, match="max_buffered_msgs: must be an int >= 0"):
        ElasticGroupConfig(max_members=2, max_buffered_msgs=-1).check()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"not json", "the stored config is not JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (b'{"max_members":0}', "max_members: the number of partitions must be >= 1"),
        (b'{"max_members":2,"member_mappings":[{"member":"a","partitions":[0]}]}', "missing [1]"),
        (b'{"max_members":"2"}', "max_members: must be an int"),
    ],
)
def test_a_stored_config_that_is_not_valid_is_a_group_error(raw, says):
    for kind in (StaticGroupConfig, ElasticGroupConfig):
        with pytest.raises(errors.ConsumerGroupError) as raised:
            kind.from_json(raw)
        assert says in str(raised.value)


def test_valid_configs_pass():
    StaticGroupConfig(max_members=3, members=["a", "b", "a"]).check()  # duplicates are tolerated, as in orbit
    ElasticGroupConfig(max_members=2, member_mappings=mapped(("a", [1, 0]))).check()
    ElasticGroupConfig(
        max_members=12, partitioning_filters=[PartitioningFilter(filter="a.*.>", partitioning_wildcards=[1])]
    ).check()
