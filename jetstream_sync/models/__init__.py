"""JetStream configuration and info models, and their mapping to and from the server's JSON.

Every model is a frozen attrs class whose field names are the server's JSON names, so the mapping is mostly
identity. Fields that need translation say so in their metadata (``kind``: duration, datetime, enum, model...),
and one generic pair, [`to_wire`][jetstream_sync.models.to_wire] / [`from_wire`][jetstream_sync.models.from_wire], does
all the work; there is no per-class JSON code.

In Python, durations are float seconds and times are timezone-aware datetimes; on the wire they are integer
nanoseconds and RFC 3339 strings. Keys the server sends that we do not model land in ``extra`` and are written
back by [`to_wire`][jetstream_sync.models.to_wire], so updating a config fetched from a newer server keeps what we do
not know about. Decoding runs no client-side validation; ``_base`` explains why.

Info fields that Go omits when zero default to the Go zero value, because that is what an absent key means.

Nested objects are models as well (a stream's [`Placement`][jetstream_sync.models.Placement], its mirror and sources as
[`StreamSource`][jetstream_sync.models.StreamSource], the [`ClusterInfo`][jetstream_sync.models.ClusterInfo] of an
info). Where a config takes one, a dict in the server's JSON shape is accepted too, as it was before those types
existed; it is decoded and checked like the model it stands for.

The types are split by API area, the way nats.go splits ``jetstream/stream_config.go`` and
``consumer_config.go``, so a change to one area's wire format is made and reviewed in one place:

- ``_base``: the attrs base class, the generic mapping, time and duration conversions, shared validators.
- ``stream``: stream policies, [`StreamConfig`][jetstream_sync.models.StreamConfig] (its
  [`RePublish`][jetstream_sync.models.RePublish] and
  [`StreamConsumerLimits`][jetstream_sync.models.StreamConsumerLimits]),
  [`StreamInfo`][jetstream_sync.models.StreamInfo], [`StreamState`][jetstream_sync.models.StreamState],
  [`StoredMsg`][jetstream_sync.models.StoredMsg], and mirrors and sources:
  [`StreamSource`][jetstream_sync.models.StreamSource], [`SubjectTransform`][jetstream_sync.models.SubjectTransform],
  [`ExternalStream`][jetstream_sync.models.ExternalStream],
  [`StreamConsumerSource`][jetstream_sync.models.StreamConsumerSource],
  [`StreamSourceInfo`][jetstream_sync.models.StreamSourceInfo].
- ``cluster``: [`Placement`][jetstream_sync.models.Placement], and the
  [`ClusterInfo`][jetstream_sync.models.ClusterInfo] and [`PeerInfo`][jetstream_sync.models.PeerInfo] streams and
  consumers report.
- ``consumer``: consumer policies, [`ConsumerConfig`][jetstream_sync.models.ConsumerConfig],
  [`ConsumerInfo`][jetstream_sync.models.ConsumerInfo], [`SequenceInfo`][jetstream_sync.models.SequenceInfo].
- ``lag``: [`ConsumerLag`][jetstream_sync.models.ConsumerLag], the backlog figures of a consumer's info.
- ``account``: [`AccountInfo`][jetstream_sync.models.AccountInfo],
  [`AccountLimits`][jetstream_sync.models.AccountLimits], [`APIStats`][jetstream_sync.models.APIStats].
- ``publish``: [`PubAck`][jetstream_sync.models.PubAck], [`BatchAck`][jetstream_sync.models.BatchAck].
- ``advisory``: the typed ``$JS.EVENT`` advisories and metrics ([`Advisory`][jetstream_sync.models.Advisory] and its
  kinds).

The key-value and object store models go here as well, as ``models/kv.py`` and ``models/object_store.py``,
built on ``_base`` like the others and re-exported below.

Everything is re-exported from this package, which is the import path to use
(``from jetstream_sync.models import StreamConfig``); the submodule layout is an internal detail.
"""

from __future__ import annotations

# Not public, but tests build their own models with these to reach mapping kinds the public models do not use;
# the redundant alias marks a deliberate re-export for ruff and mypy (which would otherwise hide it).
from ._base import _meta as _meta
from ._base import _Model as _Model
from ._base import from_wire, nanos, parse_time, seconds, to_wire
from .account import AccountInfo, AccountLimits, APIStats
from .advisory import (
    Advisory,
    AdvisoryAction,
    AdvisoryKind,
    APIAudit,
    ConsumerAckMetric,
    ConsumerAction,
    ConsumerLeaderElected,
    ConsumerPaused,
    MaxDeliveriesExceeded,
    MessageNaked,
    MessageTerminated,
    StreamAction,
    StreamLeaderElected,
    UnknownAdvisory,
    parse_advisory,
)
from .cluster import ClusterInfo, PeerInfo, Placement
from .consumer import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseState,
    DeliverPolicy,
    PriorityGroupState,
    PriorityPolicy,
    ReplayPolicy,
    SequenceInfo,
)
from .kv import KeyValueConfig, KeyValueEntry, KeyValueOp, KeyValueStatus
from .lag import ConsumerLag
from .object_store import ObjectInfo, ObjectLink, ObjectMeta, ObjectStoreConfig, ObjectStoreStatus
from .publish import BatchAck, PubAck
from .stream import (
    DiscardPolicy,
    ExternalStream,
    PersistMode,
    RePublish,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StoredMsg,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamInfo,
    StreamSource,
    StreamSourceInfo,
    StreamState,
    SubjectTransform,
)

__all__ = [
    "APIAudit",
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "Advisory",
    "AdvisoryAction",
    "AdvisoryKind",
    "BatchAck",
    "ClusterInfo",
    "ConsumerAckMetric",
    "ConsumerAction",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerLag",
    "ConsumerLeaderElected",
    "ConsumerPauseState",
    "ConsumerPaused",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "MaxDeliveriesExceeded",
    "MessageNaked",
    "MessageTerminated",
    "PeerInfo",
    "PersistMode",
    "Placement",
    "PriorityGroupState",
    "PriorityPolicy",
    "PubAck",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "StreamAction",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamInfo",
    "StreamLeaderElected",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransform",
    "UnknownAdvisory",
    "from_wire",
    "nanos",
    "parse_advisory",
    "parse_time",
    "seconds",
    "to_wire",
    "KeyValueConfig",
    "KeyValueEntry",
    "KeyValueOp",
    "KeyValueStatus",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
]
