"""What orbit.go's ``pcgroups`` puts on the server, worked out by hand from its Go sources (github.com/synadia-io/
orbit.go, commit 873426d, directory pcgroups/), for the layout tests to compare our groups with. Nothing here is
computed by jetstream_sync: each value is what the cited Go lines produce.

Files: stream_consumer_group.go (SCG), static_stream_consumer_group.go (STATIC), elastic_stream_consumer_group.go
(ELASTIC).
"""

from __future__ import annotations

# STATIC:31 kvStaticBucketName; ELASTIC:34 kvElasticBucketName
STATIC_BUCKET = "static-consumer-groups"
ELASTIC_BUCKET = "elastic-consumer-groups"
# STATIC:225, ELASTIC:261: the bucket is created with the stream's replicas and file storage, default history (1)
BUCKET_STORAGE = "file"

# SCG:38 priorityGroupName
PRIORITY_GROUP = "PCG"
# SCG:31-36: pullTimeoutDivider 2, consumerIdleTimeoutFactor 1, defaultAckWait 5 s, minPullExpiryPinnedTTL 1 s
DEFAULT_ACK_WAIT = 5.0
# STATIC:431, ELASTIC:725 PinnedTTL = max(AckWait, 1 s); STATIC:447, ELASTIC:770 PullExpiry = max(AckWait/2, 1 s)
PIN_AND_EXPIRY = [  # (ack_wait, pinned_ttl, pull_expiry)
    (5.0, 5.0, 2.5),
    (2.0, 2.0, 1.0),
    (0.5, 1.0, 1.0),
    (1.5, 1.5, 1.0),
]


def config_key(stream: str, group: str) -> str:
    """SCG:55-57 composeKey: stream + "." + consumerGroupName."""
    return stream + "." + group


def work_stream(stream: str, group: str) -> str:
    """ELASTIC:997-999 composeCGSName: stream + "-" + consumerGroupName."""
    return stream + "-" + group


def static_consumer(group: str, member: str) -> str:
    """STATIC:565-567 composeStaticConsumerName: cgName + "-" + member (a durable, STATIC:426)."""
    return group + "-" + member


# ELASTIC:719-720: an elastic member's consumer has Durable "" and Name = the member name; ELASTIC:102
# InactiveThreshold = AckWait * consumerIdleTimeoutFactor (1); ELASTIC:94: AckPolicy must be explicit.

# SCG:65-115 GeneratePartitionFilters(members, maxMembers, memberMappings, memberName, filter): members are
# deduplicated, sorted, cut to maxMembers; numPer = maxMembers / n; partition i < n*numPer goes to members[i/numPer],
# the rest to members[(i - n*numPer) % n]; filters are fmt "%d.%s" (partition, filter); with mappings "%d.>".
# (members, max_members, {member: its partitions}) worked out by hand:
BALANCED = [
    (["m3", "m1", "m2", "m1"], 12, {"m1": [0, 1, 2, 3], "m2": [4, 5, 6, 7], "m3": [8, 9, 10, 11]}),
    (["a", "b", "c", "d", "e"], 12, {"a": [0, 1, 10], "b": [2, 3, 11], "c": [4, 5], "d": [6, 7], "e": [8, 9]}),
    (["x", "y", "z"], 2, {"x": [0], "y": [1], "z": []}),
    (["solo"], 3, {"solo": [0, 1, 2]}),
    (["b", "a"], 3, {"a": [0, 2], "b": [1]}),
]
# STATIC:413-419: a static member's filters, one GeneratePartitionFilters call per group filter, in filter order
STATIC_FILTERS = [  # (filters, members, max_members, member, consumer filters)
    (["foo.*", "bar.>"], ["a", "b"], 4, "a", ["0.foo.*", "1.foo.*", "0.bar.>", "1.bar.>"]),
    (["foo.*", "bar.>"], ["a", "b"], 4, "b", ["2.foo.*", "3.foo.*", "2.bar.>", "3.bar.>"]),
    (None, ["a", "b"], 4, "b", ["2.>", "3.>"]),
]
# SCG:101-112: with mappings, "%d.>" for each partition of the member's mapping, in the mapping's order
MAPPED_FILTERS = [  # (mappings as (member, partitions), member, consumer filters)
    ([("a", [3, 0]), ("b", [1, 2])], "a", ["3.>", "0.>"]),
    ([("a", [3, 0]), ("b", [1, 2])], "b", ["1.>", "2.>"]),
]

# ELASTIC:925-950 getPartitioningTransformDest: the filter's "*" tokens become {{Wildcard(k)}} (k from 1), prefixed
# by {{Partition(max)}} without partitioning wildcards, {{Partition(max,i,j)}} with them; ELASTIC:306-317: one
# transform per partitioning filter, or source ">" with {{Partition(max)}}.> when there is none.
TRANSFORMS = [  # (filter, wildcards, max_members, destination)
    ("foo.*", [1], 12, "{{Partition(12,1)}}.foo.{{Wildcard(1)}}"),
    ("foo.*.*", [2], 12, "{{Partition(12,2)}}.foo.{{Wildcard(1)}}.{{Wildcard(2)}}"),
    ("a.*.b.*", [2, 1], 3, "{{Partition(3,2,1)}}.a.{{Wildcard(1)}}.b.{{Wildcard(2)}}"),
    ("foo.>", [], 12, "{{Partition(12)}}.foo.>"),
]
NO_FILTER_TRANSFORM = (">", "{{Partition(7)}}.>")  # max_members 7

# ELASTIC:322-332: the work-queue stream (besides name, replicas and storage from the stream, and its source)
WORK_STREAM = {"retention": "workqueue", "discard": "new", "allow_direct": True}

# STATIC:52-57 and ELASTIC:54-67: the JSON tags, in struct order (encoding/json writes fields in that order, no
# spaces); omitempty on filters, members, member_mappings, max_buffered_msg (sic), max_buffered_bytes; none on
# max_members, partitioning_filters (a nil slice is written null), partitioning_wildcards and partitions.
STATIC_JSON = [  # (max_members, filters, members, mappings, the stored value)
    (4, ["foo.*"], ["a", "b"], None, b'{"max_members":4,"filters":["foo.*"],"members":["a","b"]}'),
    (
        4,
        None,
        None,
        [("a", [0, 1]), ("b", [2, 3])],
        b'{"max_members":4,"member_mappings":[{"member":"a","partitions":[0,1]},{"member":"b","partitions":[2,3]}]}',
    ),
]
ELASTIC_JSON = [  # (max_members, filters as (filter, wildcards) or None, max msgs, max bytes, members, stored value)
    (
        12,
        [("foo.*", [1])],
        1000,
        1048576,
        None,
        b'{"max_members":12,"partitioning_filters":[{"filter":"foo.*","partitioning_wildcards":[1]}],'
        b'"max_buffered_msg":1000,"max_buffered_bytes":1048576}',
    ),
    (3, None, 0, 0, ["m1", "m2"], b'{"max_members":3,"partitioning_filters":null,"members":["m1","m2"]}'),
]
