"""The publish acknowledgements: [`PubAck`][jetstream_sync.models.PubAck], and
[`BatchAck`][jetstream_sync.models.BatchAck] for a committed batch.

Apart from the stream types because it is the reply to a publish rather than part of the stream API, as nats.go
keeps ``PubAck`` in ``jetstream/publish.go``; publishing code needs only this and the base.
"""

from __future__ import annotations

import attrs

from ._base import _OMITEMPTY, _meta, _Model

__all__ = ["BatchAck", "PubAck"]


@attrs.frozen(kw_only=True)
class PubAck(_Model):
    """The server's acknowledgement of a JetStream publish."""

    stream: str
    seq: int
    duplicate: bool = attrs.field(default=False, metadata=_OMITEMPTY)
    domain: str | None = None
    #: a counter stream's total on the subject after this increment (ADR-49), as the server's decimal text
    value: str | None = attrs.field(default=None, metadata=_meta(wire="val", omitempty=True))


@attrs.frozen(kw_only=True)
class BatchAck(_Model):
    """The server's acknowledgement of a committed batch (ADR-50): ``seq`` is the stream sequence of its last
    message, ``batch_size`` how many messages the batch stored."""

    stream: str
    seq: int
    batch_id: str = attrs.field(metadata=_meta(wire="batch"))
    batch_size: int = attrs.field(metadata=_meta(wire="count"))
    domain: str | None = None
    #: on a counter stream, the total after the last increment of the batch
    value: str | None = attrs.field(default=None, metadata=_meta(wire="val", omitempty=True))
