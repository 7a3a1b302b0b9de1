"""The publish acknowledgement, :class:`PubAck`.

Apart from the stream types because it is the reply to a publish rather than part of the stream API, as nats.go
keeps ``PubAck`` in ``jetstream/publish.go``; publishing code needs only this and the base.
"""

from __future__ import annotations

import attrs

from ._base import _OMITEMPTY, _meta, _Model

__all__ = ["PubAck"]


@attrs.frozen(kw_only=True)
class PubAck(_Model):
    """The server's acknowledgement of a JetStream publish."""

    stream: str
    seq: int
    duplicate: bool = attrs.field(default=False, metadata=_OMITEMPTY)
    domain: str | None = None
    #: a counter stream's total on the subject after this increment (ADR-49), as the server's decimal text
    value: str | None = attrs.field(default=None, metadata=_meta(wire="val", omitempty=True))
