"""Stream: info, purge, reading (one message, or many in one round trip) and deleting messages, and its consumers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .. import errors
from .._runtime import ProcessLocal
from .._validate import check_int, check_name, check_subject
from ..models import ConsumerConfig, ConsumerInfo, StoredMsg, StreamInfo
from ..models.cluster import clustered_leader
from ._features import require_server
from .consumers import Consumer, OrderedConsumer, OrderedConsumerConfig, OrderedPushConsumer, PushConsumer
from .direct import direct_get_batch, direct_get_last, direct_get_one

if TYPE_CHECKING:
    from .api import JetStreamAPI
    from .context import JetStream

__all__ = ["Stream", "fetch_stream_info"]


def fetch_stream_info(
    api: JetStreamAPI, name: str, subjects_filter: str | None = None, deleted_details: bool = False
) -> StreamInfo:
    """``STREAM.INFO`` of stream ``name``; with ``subjects_filter``, every matching subject's count, asked page by
    page (the server sends at most 100,000 subjects a reply, sorted, and says how many match in ``total``)."""
    check_name("stream", name)
    body: dict[str, Any] = {}
    if subjects_filter is not None:
        body["subjects_filter"] = check_subject("subjects_filter", subjects_filter, wildcards=True)
    if not isinstance(deleted_details, bool):
        raise errors.InvalidTypeError("deleted_details", f"must be True or False, got {type(deleted_details).__name__}")
    if deleted_details:
        body["deleted_details"] = True
    suffix = f"STREAM.INFO.{name}"
    response = api.request(suffix, body or None)
    info = StreamInfo.from_json(response)
    if subjects_filter is None:
        return info
    subjects = dict(info.state.subjects or {})
    total = response.get("total")
    while isinstance(total, int) and len(subjects) < total:
        offset = len(subjects)
        page = api.request(suffix, {**body, "offset": offset})
        more = StreamInfo.from_json(page).state.subjects or {}
        total = page.get("total")
        if not more and isinstance(total, int) and offset < total:
            raise errors.ProtocolError(
                f"the server reported {total} subjects of stream {name!r} matching {subjects_filter!r}, but its "
                f"page at offset {offset} held none"
            )
        subjects.update(more)
        if len(subjects) == offset:  # nothing new (subjects came and went between pages): this is all of them
            break
    return attrs.evolve(info, state=attrs.evolve(info.state, subjects=subjects))


class Stream(ProcessLocal):
    """A handle on one stream. ``cached_info`` is what the last call saw; ``info()`` asks the server."""

    def __init__(self, js: JetStream, info: StreamInfo) -> None:
        #: the JetStream context this handle was made by
        self.jetstream = js
        self.name: str = info.config.name
        self.cached_info = info

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"

    def info(self, *, subjects_filter: str | None = None, deleted_details: bool = False) -> StreamInfo:
        """The stream's info, asked now (also kept as ``cached_info``, without the details below).

        ``subjects_filter`` (wildcards allowed; ``>`` for all) fills ``state.subjects`` with the message count of
        every matching subject, and ``deleted_details`` fills ``state.deleted`` with the deleted sequences:
        nats.go's ``WithSubjectFilter`` and ``WithDeletedDetails``. See
        [`JetStream.stream_info`][jetstream_sync.JetStream.stream_info].
        """
        info = self.jetstream.stream_info(self.name, subjects_filter=subjects_filter, deleted_details=deleted_details)
        self.cached_info = info
        if subjects_filter is not None or deleted_details:  # details may be large: not kept in the cache
            self.cached_info = attrs.evolve(info, state=attrs.evolve(info.state, subjects=None, deleted=None))
        return info

    def leader(self) -> str | None:
        """The name of the server leading the stream now: asks the server (a fresh [`info`][jetstream_sync.Stream.info],
        which also updates ``cached_info``). None when JetStream is not clustered, and while the stream elects a leader;
        ``info().cluster`` has the replicas and the rest."""
        return clustered_leader(self.info().cluster)

    def purge(self, subject: str | None = None, sequence: int | None = None, keep: int | None = None) -> int:
        """Remove messages (all, or those on ``subject``; below ``sequence``; all but the last ``keep``).

        Returns how many were purged.
        """
        if sequence is not None and keep is not None:
            raise errors.InvalidArgumentError("keep", "sequence and keep cannot be combined; pass one of them")
        body: dict[str, Any] = {}
        if subject is not None:
            body["filter"] = check_subject("subject", subject, wildcards=True)
        if sequence is not None:
            body["seq"] = check_int("sequence", sequence, minimum=1)
        if keep is not None:
            body["keep"] = check_int("keep", keep, minimum=0)
        response = self.jetstream.api.request(f"STREAM.PURGE.{self.name}", body or None)
        return int(response.get("purged", 0))

    # -- single messages --------------------------------------------------------------------------------
    def get_msg(
        self,
        sequence: int,
        *,
        subject: str | None = None,
        direct: bool | None = None,
        timeout: float | None = None,
    ) -> StoredMsg:
        """The message stored at ``sequence``; MessageNotFoundError when there is none.

        With ``subject`` (wildcards allowed): the first message on it stored at or after ``sequence`` (the API's
        ``next_by_subj``, nats.go's ``WithGetMsgSubject``), so ``get_msg(m.seq + 1, subject=s)`` walks one
        subject's messages without a consumer.

        Uses direct get (served by any replica, which may not have applied the latest writes yet) when the stream
        allows it, unless ``direct=False``: then the stream leader answers. ``timeout``: the context's by
        default; an election, or a stream whose servers are restarting, is waited out within it.
        """
        body: dict[str, Any] = {"seq": check_int("sequence", sequence, minimum=1)}
        if subject is not None:
            body["next_by_subj"] = check_subject("subject", subject, wildcards=True)
        try:
            if self._use_direct(direct):
                return direct_get_one(self.jetstream.api, self.name, body, timeout=timeout)
            return self._api_get(body, timeout)
        except errors.MessageNotFoundError as exc:
            raise self._not_found(exc, sequence, subject) from None

    def get_last_msg(self, subject: str, *, direct: bool | None = None, timeout: float | None = None) -> StoredMsg:
        """The last message stored on ``subject``; MessageNotFoundError when there is none. ``direct`` and
        ``timeout`` as for [`get_msg`][jetstream_sync.Stream.get_msg]."""
        check_subject("subject", subject, wildcards=True)
        try:
            if self._use_direct(direct):
                return direct_get_one(self.jetstream.api, f"{self.name}.{subject}", None, timeout=timeout)
            return self._api_get({"last_by_subj": subject}, timeout)
        except errors.MessageNotFoundError as exc:
            raise self._not_found(exc, None, subject) from None

    def _not_found(
        self, exc: errors.MessageNotFoundError, sequence: int | None, subject: str | None
    ) -> errors.MessageNotFoundError:
        """``exc`` saying which stream was read and what was asked of it (the server's says "no message found")."""
        return errors.MessageNotFoundError(exc.code, exc.err_code, exc.description, self.name, sequence, subject)

    # -- many messages in one round trip (ADR-31 batched direct get, nats-server 2.11+, allow_direct) -----------
    def get_msgs(
        self,
        start_seq: int,
        batch: int,
        *,
        subjects: Sequence[str] | None = None,
        up_to_seq: int | None = None,
        max_bytes: int | None = None,
    ) -> list[StoredMsg]:
        """Up to ``batch`` messages stored at or after ``start_seq``, in order, optionally only on ``subjects``
        (wildcards allowed), up to ``up_to_seq``, and within ``max_bytes`` of payload. Needs ``allow_direct``
        (NoRespondersError otherwise) and nats-server 2.11+; see
        [`jetstream_sync.direct.direct_get_batch`][jetstream_sync.direct.direct_get_batch]."""
        require_server(self.jetstream.runtime.server_info(), "batched direct get", (2, 11, 0))
        return direct_get_batch(self, start_seq, batch, subjects=subjects, up_to_seq=up_to_seq, max_bytes=max_bytes)

    def get_last_msgs_for(self, subjects: Sequence[str], *, up_to_seq: int | None = None) -> list[StoredMsg]:
        """The last message on each subject matching ``subjects`` (wildcards allowed), in stream order, read
        at one moment (or as of ``up_to_seq``). Subjects with no message are absent. Needs ``allow_direct`` and
        nats-server 2.11+; see [`jetstream_sync.direct.direct_get_last`][jetstream_sync.direct.direct_get_last]."""
        require_server(self.jetstream.runtime.server_info(), "multi-subject direct get", (2, 11, 0))
        return direct_get_last(self, subjects, up_to_seq=up_to_seq)

    def _use_direct(self, direct: bool | None) -> bool:
        if direct is not None:
            return direct
        return bool(self.cached_info.config.allow_direct)

    def _api_get(self, body: dict[str, Any], timeout: float | None) -> StoredMsg:
        """The stream leader's answer (``STREAM.MSG.GET``, retried through an election)."""
        response = self.jetstream.api.request(f"STREAM.MSG.GET.{self.name}", body, timeout)
        return StoredMsg.from_api(response["message"])

    def delete_msg(self, sequence: int) -> None:
        """Delete the message at ``sequence`` (marked deleted; its bytes may remain on disk)."""
        check_int("sequence", sequence, minimum=1)
        self.jetstream.api.request(f"STREAM.MSG.DELETE.{self.name}", {"seq": sequence, "no_erase": True})

    def secure_delete_msg(self, sequence: int) -> None:
        """Delete the message at ``sequence`` and overwrite its bytes on disk."""
        check_int("sequence", sequence, minimum=1)
        self.jetstream.api.request(f"STREAM.MSG.DELETE.{self.name}", {"seq": sequence})

    # -- consumers --------------------------------------------------------------------------------------
    def create_consumer(self, config: ConsumerConfig) -> Consumer:
        """Create a pull consumer on this stream (see
        [`JetStream.create_consumer`][jetstream_sync.JetStream.create_consumer])."""
        return self.jetstream.create_consumer(self.name, config)

    def update_consumer(self, config: ConsumerConfig) -> Consumer:
        """Update a pull consumer of this stream (see
        [`JetStream.update_consumer`][jetstream_sync.JetStream.update_consumer])."""
        return self.jetstream.update_consumer(self.name, config)

    def create_or_update_consumer(self, config: ConsumerConfig) -> Consumer:
        """Create a pull consumer on this stream, or update it when it exists."""
        return self.jetstream.create_or_update_consumer(self.name, config)

    def create_push_consumer(self, config: ConsumerConfig) -> PushConsumer:
        """Create a push consumer on this stream (see
        [`JetStream.create_push_consumer`][jetstream_sync.JetStream.create_push_consumer])."""
        return self.jetstream.create_push_consumer(self.name, config)

    def update_push_consumer(self, config: ConsumerConfig) -> PushConsumer:
        """Update a push consumer of this stream."""
        return self.jetstream.update_push_consumer(self.name, config)

    def create_or_update_push_consumer(self, config: ConsumerConfig) -> PushConsumer:
        """Create a push consumer on this stream, or update it when it exists."""
        return self.jetstream.create_or_update_push_consumer(self.name, config)

    def push_consumer(self, name: str) -> PushConsumer:
        """A handle on an existing push consumer of this stream."""
        return self.jetstream.push_consumer(self.name, name)

    def ordered_push_consumer(
        self, config: OrderedConsumerConfig | None = None, *, idle_heartbeat: float = 5.0
    ) -> OrderedPushConsumer:
        """An ordered push consumer on this stream (see
        [`JetStream.ordered_push_consumer`][jetstream_sync.JetStream.ordered_push_consumer])."""
        return self.jetstream.ordered_push_consumer(self.name, config, idle_heartbeat=idle_heartbeat)

    def ordered_consumer(self, config: OrderedConsumerConfig | None = None) -> OrderedConsumer:
        """An ordered read of this stream (see
        [`JetStream.ordered_consumer`][jetstream_sync.JetStream.ordered_consumer])."""
        return self.jetstream.ordered_consumer(self.name, config)

    def consumer(self, name: str) -> Consumer:
        """A handle on an existing pull consumer of this stream; ConsumerNotFoundError when there is none."""
        return self.jetstream.consumer(self.name, name)

    def delete_consumer(self, name: str) -> None:
        """Delete a consumer of this stream."""
        self.jetstream.delete_consumer(self.name, name)

    def consumers(self) -> Iterator[ConsumerInfo]:
        """Every consumer's info on this stream, fetched page by page."""
        return self.jetstream.consumers(self.name)

    def consumer_names(self) -> Iterator[str]:
        """Every consumer's name on this stream, fetched page by page."""
        return self.jetstream.consumer_names(self.name)
