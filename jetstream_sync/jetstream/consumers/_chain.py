"""The successive server-side consumers of one ordered consumer, and how a reset makes the next one.

`ConsumerChain` names and creates the links (``<prefix>_<n>``, never reused) and knows which stream they
read: a reset first asks whether the stream is still the one read so far (`ConsumerChain.replaced_io`), so
that a stream deleted and created anew under its name is never read from the old cursor (issue 26).
The ordered engines (``_delivery/_ordered.py``) know it as an `OrderedLink` and run the reset loop themselves
(``_delivery/_ordering.py``). See docs/ARCHITECTURE.md, "Ordered consumers".
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ... import errors
from ..._delivery import PullTarget
from ..._runtime import io_thread
from ...models import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy, StreamInfo
from ...models.reads import OrderedConsumerConfig
from ..retry import API_ATTEMPTS

if TYPE_CHECKING:
    from ..api import JetStreamAPI

__all__ = ["ConsumerChain"]

log = logging.getLogger("jetstream_sync")

#: the longest one request of a reset waits for its answer, whatever the context's timeout (see attempt_timeout)
RESET_ATTEMPT_MAX = 5.0


class ConsumerChain:
    """The successive server-side consumers of one ordered consumer: ``<prefix>_<serial>``.

    ``current`` is the live link's name. Creating a link never reuses a name, so a late message or status of
    an old link can always be told apart by the consumer name in its ack subject.
    """

    def __init__(self, api: JetStreamAPI, stream: str, config: OrderedConsumerConfig, *, push: bool = False) -> None:
        self.api = api
        self.stream = stream
        self.config = config
        self.push = push
        self.prefix = config.name_prefix or api.runtime.new_token()
        self.serial = 0
        self.current: str | None = None
        self.current_info: ConsumerInfo | None = None
        # IO thread: the stream's creation time, its identity (learnt once the first link exists)
        self.stream_created: datetime | None = None

    @property
    def max_attempts(self) -> int | None:
        return self.config.max_reset_attempts

    @property
    def attempt_timeout(self) -> float:
        """How long one request of a reset (``STREAM.INFO``, the next link's create) waits: a share of the
        context's timeout as an API retry's attempt gets, at most `RESET_ATTEMPT_MAX` seconds.

        A reset retries a request that went unanswered, so waiting the context's whole timeout for one (30 s
        where code sets it long to ride out elections) only kept a watch silent that long after a reconnect
        whose first request was lost: in rolling restarts, KV watchers fell more than a bucket's history
        behind and missed revisions for good (issue 34's history runs).
        """
        return min(max(1.0, self.api.timeout / API_ATTEMPTS), RESET_ATTEMPT_MAX)

    def next_name(self) -> str:
        """The name the next link will have: a push link may deliver before its create call returns, so its
        engine must recognise the link's messages from the moment the request is sent."""
        return f"{self.prefix}_{self.serial + 1}"

    def _request(self, start_seq: int, deliver_subject: str | None, heartbeat: float | None) -> tuple[str, Any]:
        self.serial += 1
        name = f"{self.prefix}_{self.serial}"
        config = self.server_config(name, start_seq, deliver_subject, heartbeat)
        body = {"stream_name": self.stream, "config": config.to_json(), "action": "create"}
        return f"CONSUMER.CREATE.{self.stream}.{name}", body

    def server_config(
        self, name: str, start_seq: int, deliver_subject: str | None = None, heartbeat: float | None = None
    ) -> ConsumerConfig:
        """The configuration of one link; from ``start_seq`` when some messages were already delivered."""
        cfg = self.config
        filters = cfg.filter_subjects or []
        policy, opt_seq, opt_time = cfg.deliver_policy, cfg.opt_start_seq, cfg.opt_start_time
        if start_seq > 0:
            policy, opt_seq, opt_time = DeliverPolicy.BY_START_SEQUENCE, start_seq, None
        return ConsumerConfig(
            name=name,
            deliver_policy=policy,
            opt_start_seq=opt_seq,
            opt_start_time=opt_time,
            ack_policy=AckPolicy.NONE,
            max_deliver=1,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=cfg.inactive_threshold,
            headers_only=True if cfg.headers_only else None,
            metadata=cfg.metadata,
            replay_policy=cfg.replay_policy,
            filter_subject=filters[0] if len(filters) == 1 else None,
            filter_subjects=filters if len(filters) > 1 else None,
            deliver_subject=deliver_subject,
            flow_control=True if deliver_subject else None,
            idle_heartbeat=heartbeat if deliver_subject else None,
        )

    def _adopt(self, response: dict[str, Any]) -> ConsumerInfo:
        info = ConsumerInfo.from_json(response)
        self.current = info.name
        self.current_info = info
        return info

    def create(self, start_seq: int, timeout: float, deliver_subject: str | None = None) -> ConsumerInfo:
        """User thread: create the next link (delivering from ``start_seq``, or per the config when 0)."""
        suffix, body = self._request(start_seq, deliver_subject, None)
        info = self._adopt(self.api.request(suffix, body, timeout))
        if self.stream_created is None:
            runtime = self.api.runtime
            runtime.post_if_open(lambda: runtime.spawn(self.learn_stream_io()))
        return info

    @io_thread
    async def create_io(
        self, start_seq: int, deliver_subject: str | None = None, heartbeat: float | None = None
    ) -> ConsumerInfo:
        """IO thread: the same, awaited on the loop."""
        suffix, body = self._request(start_seq, deliver_subject, heartbeat)
        info = self._adopt(await self.api.request_io(suffix, body, self.attempt_timeout))
        if self.stream_created is None:
            self.api.runtime.spawn(self.learn_stream_io())
        return info

    @io_thread
    async def info_io(self) -> ConsumerInfo | None:
        """IO thread: the live link's info now (None between a reset and the next link)."""
        name = self.current
        if name is None:
            return None
        return ConsumerInfo.from_json(
            await self.api.request_io(f"CONSUMER.INFO.{self.stream}.{name}", None, self.attempt_timeout)
        )

    @io_thread
    async def learn_stream_io(self) -> None:
        """IO thread: remember which stream this is (its creation time), so that a reset can tell the stream
        read so far from one deleted and created anew under its name. Asked beside the first link, not before
        it, so a read's first message waits for no extra round trip; a failure only means the reset checks the
        last sequence alone."""
        if self.stream_created is not None:
            return
        try:
            info = StreamInfo.from_json(
                await self.api.request_io(f"STREAM.INFO.{self.stream}", None, self.attempt_timeout)
            )
        except errors.JetStreamError as exc:
            log.debug("ordered consumer on %s: could not learn the stream's creation time: %s", self.stream, exc)
            return
        if self.stream_created is None:
            self.stream_created = info.created

    @io_thread
    async def replaced_io(self, cursor: int) -> str | None:
        """IO thread, before a reset creates the next link: why the stream is not the one read so far (its
        creation time changed, or it ends below ``cursor``, the last sequence read), or None when it is.

        Without this, the next link would start at ``cursor + 1`` of the new stream: its first messages skipped
        without a word, and a KV watcher whose revision is past the new bucket's end silent for good. Raises
        StreamNotFoundError when the stream is gone (the reset ends, as it always did on a deleted stream).
        """
        info = await self.api.request_io(f"STREAM.INFO.{self.stream}", None, self.attempt_timeout)
        return self._compare(StreamInfo.from_json(info), cursor)

    def replaced(self, cursor: int, timeout: float) -> str | None:
        """User thread (an ordered fetch or next() replacing its link): `replaced_io`, blocking."""
        return self._compare(
            StreamInfo.from_json(self.api.request(f"STREAM.INFO.{self.stream}", None, timeout)), cursor
        )

    def replacement(self, label: str, why: str, cursor: int) -> errors.StreamReplacedError:
        """Any thread: what a read labelled ``label`` does on finding its stream replaced (``why``) after
        ``cursor``. With ``on_stream_replaced="error"`` it raises StreamReplacedError (the read ends with it);
        with "restart" it logs and returns the event to report, and the caller starts over."""
        config = self.config
        if config.on_stream_replaced == "error":
            raise errors.StreamReplacedError(f"{label}: the stream {self.stream!r} was replaced: {why}")
        event = errors.StreamReplacedError(
            f"{label}: the stream {self.stream!r} was replaced ({why}); reading the new stream from its beginning "
            f"(deliver_policy {config.deliver_policy.value}) instead of after sequence {cursor}"
        )
        log.warning("%s", event)
        return event

    def _compare(self, info: StreamInfo, cursor: int) -> str | None:
        """Any thread, one read at a time: the stream ``info`` against the one read so far. ``stream_created`` is
        written here and by `learn_stream_io` (IO thread), which only fills it while it is unset: both
        store the creation time of the stream as it was when asked."""
        before, self.stream_created = self.stream_created, info.created
        if before is not None and info.created != before:
            return f"it was created anew at {info.created.isoformat()} (the stream read so far: {before.isoformat()})"
        if cursor and info.state.last_seq < cursor:
            return f"it ends at sequence {info.state.last_seq}, below sequence {cursor} already read"
        return None

    def delete_current_soon(self) -> None:
        """Any thread: delete the live link without waiting (it also goes by itself after inactive_threshold)."""
        name, self.current = self.current, None
        if name is not None:
            self.api.forget_soon(f"CONSUMER.DELETE.{self.stream}.{name}")

    def start_floor(self, info: ConsumerInfo) -> int:
        """The stream sequence a new link ``info`` starts after, before anything was delivered: a reset before
        the first message keeps that starting point (DeliverPolicy.NEW stays "new as of the first link").
        last_per_subject has no single such point and keeps its policy (0)."""
        if self.config.deliver_policy is DeliverPolicy.LAST_PER_SUBJECT:
            return 0
        return info.delivered.stream_seq

    def pull_target(self, info: ConsumerInfo) -> PullTarget:
        return PullTarget(
            stream=self.stream,
            consumer=info.name,
            next_subject=self.api.subject(f"CONSUMER.MSG.NEXT.{self.stream}.{info.name}").encode(),
            ack_none=True,
        )
