"""The JetStream context: streams, consumers, account info and publishing (ADR-37 "JetStream Context")."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs
import tenacity

from .. import _telemetry, errors
from .._protocol import Command, reply_encoder
from .._runtime import ProcessLocal, RawReply, Runtime
from .._validate import (
    check_int,
    check_name,
    check_subject,
    check_timeout,
    options_from,
    prepare_message,
    to_seconds,
)
from ..codecs._payload import Codec, payload_of
from ..headers import HeadersInput
from ..models import (
    AccountInfo,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseState,
    PubAck,
    StreamConfig,
    StreamInfo,
)
from ..models.advisory import AdvisoryKind
from ..models.consumer import ConsumerPauseRequest, check_priority_group
from ._features import consumer_features, require_features, require_server, server_api_level, stream_features
from .advisories import Advisories, open_advisories
from .api import JetStreamAPI
from .batch import AtomicBatch
from .consumers import (
    Consumer,
    OrderedConsumer,
    OrderedConsumerConfig,
    OrderedPushConsumer,
    PushConsumer,
    check_push_config,
)
from .counter import Counter
from .dead_letter import DeadLetters
from .fast_publish import FastPublisher
from .kv.manager import KeyValueManager
from .object_store.manager import ObjectStoreManager
from .publish import (
    DEFAULT_MAX_PENDING,
    DEFAULT_MAX_PENDING_BYTES,
    NO_CHECKS,
    AsyncPublisher,
    PublishOptions,
    parse_pub_ack,
)
from .retry import default_publish_retry, retry_within, split_timeout, within_deadline
from .streams import Stream, fetch_stream_info
from .subscribe import _SubscribeCalls

if TYPE_CHECKING:  # the facade, only as what JetStream(client) takes and js.client gives back
    from ..client import Client

__all__ = ["JetStream"]

log = logging.getLogger("jetstream_sync")


class JetStream(KeyValueManager, ObjectStoreManager, _SubscribeCalls, ProcessLocal):
    """Manage streams and consumers, and publish with acknowledgements. Thread-safe; cheap to create.

    ``publish_retry`` is a ``tenacity.Retrying`` deciding how "no responders" (503) is retried by
    ``publish``; the default tries 4 times over about 0.3 s. ``api_retry`` decides how an idempotent API
    request (an info, a list, a create that names what it makes) is retried when it meets a cluster election;
    the default retries ClusterUnavailableError and timeouts within the request's timeout
    (`jetstream_sync.jetstream.retry`).
    """

    def __init__(
        self,
        client: Client,
        *,
        timeout: float | timedelta | None = None,
        domain: str | None = None,
        api_prefix: str | None = None,
        publish_retry: tenacity.Retrying | None = None,
        api_retry: tenacity.Retrying | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        stall_timeout: float | timedelta = 10.0,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ) -> None:
        if domain is not None and api_prefix is not None:
            raise errors.InvalidArgumentError("domain", "set either domain or api_prefix, not both")
        if domain is not None:
            check_name("domain", domain)
            prefix = f"$JS.{domain}.API"
        elif api_prefix is not None:
            prefix = check_subject("api_prefix", api_prefix.rstrip("."))
        else:
            prefix = "$JS.API"
        for name, policy in (("publish_retry", publish_retry), ("api_retry", api_retry)):
            if policy is not None and not isinstance(policy, tenacity.Retrying):
                raise errors.InvalidTypeError(name, f"must be a tenacity.Retrying, got {type(policy).__name__}")
        runtime = getattr(client, "runtime", None)  # the layer below talks to the port, never to the client
        if not isinstance(runtime, Runtime):
            raise errors.InvalidTypeError("client", f"must be a jetstream_sync.Client, got {type(client).__name__}")
        self.client = client
        self.domain = domain
        self.timeout = check_timeout(timeout, runtime.default_timeout)
        #: the JetStream API this context talks to; ``js.api.request(suffix, body)`` reaches any API call
        self.api = JetStreamAPI(runtime, prefix, self.timeout, api_retry)
        self._runtime = runtime
        self._retry = publish_retry or default_publish_retry()
        self._publisher = AsyncPublisher(
            self._runtime,
            max_pending=check_int("max_pending", max_pending, minimum=1),
            max_pending_bytes=check_int("max_pending_bytes", max_pending_bytes, minimum=1),
            ack_timeout=self.timeout,
            stall_timeout=to_seconds("stall_timeout", stall_timeout),
        )

    def __repr__(self) -> str:
        return f"<JetStream api_prefix={self.api_prefix!r}>"

    @property
    def runtime(self) -> Runtime:
        """The client's [`Runtime`][jetstream_sync.Runtime] port (the same object as ``client.runtime``): what this
        context, its handles and code that extends the client talk to; application code does not need it."""
        return self._runtime

    @property
    def api_prefix(self) -> str:
        """``$JS.API``, ``$JS.<domain>.API`` or the prefix given."""
        return self.api.prefix

    # -- streams ----------------------------------------------------------------------------------------
    def _stream_request(self, action: str, config: StreamConfig) -> Stream:
        """A create or update, checked for the features the server needs and sent asserting their API level."""
        if not isinstance(config, StreamConfig):
            raise errors.InvalidTypeError("config", f"must be a StreamConfig, got {type(config).__name__}")
        level = require_features(self._runtime.server_info(), stream_features(config))
        response = self.api.request(f"STREAM.{action}.{config.name}", config.to_json(), required_api_level=level)
        return Stream(self, StreamInfo.from_json(response))

    def create_stream(self, config: StreamConfig) -> Stream:
        """Create a stream; StreamNameInUseError when it exists with a different configuration."""
        return self._stream_request("CREATE", config)

    def update_stream(self, config: StreamConfig) -> Stream:
        """Update a stream; StreamNotFoundError when it does not exist."""
        return self._stream_request("UPDATE", config)

    def create_or_update_stream(self, config: StreamConfig) -> Stream:
        """Update the stream to ``config``, or create it when it does not exist."""
        try:
            return self.update_stream(config)
        except errors.StreamNotFoundError:
            return self.create_stream(config)

    def stream(self, name: str) -> Stream:
        """A handle on an existing stream (its info is fetched); StreamNotFoundError otherwise."""
        return Stream(self, self.stream_info(name))

    def counter(self, name: str) -> Counter:
        """The counters of stream ``name``, which must allow them (``StreamConfig(allow_msg_counter=True)``,
        nats-server 2.12+); see [`Counter`][jetstream_sync.Counter]."""
        require_server(self._runtime.server_info(), "counters", (2, 12, 0))
        stream = self.stream(name)
        if not stream.cached_info.config.allow_msg_counter:
            raise errors.InvalidArgumentError(
                "name", f"stream {name!r} does not keep counters: create it with StreamConfig(allow_msg_counter=True)"
            )
        return Counter(stream)

    def stream_info(
        self, name: str, *, subjects_filter: str | None = None, deleted_details: bool = False
    ) -> StreamInfo:
        """The stream's info, asked now; StreamNotFoundError when there is no such stream.

        ``subjects_filter`` (wildcards allowed; ``>`` for all) fills ``state.subjects`` with the message count of
        every matching subject (all of them: asked page by page past the server's 100,000 a reply), and
        ``deleted_details`` fills ``state.deleted`` with the deleted sequences (nats.go's ``WithSubjectFilter``
        and ``WithDeletedDetails``).
        """
        return fetch_stream_info(self.api, name, subjects_filter, deleted_details)

    def delete_stream(self, name: str) -> None:
        """Delete the stream and its messages; StreamNotFoundError when there is no such stream. Sent once,
        never repeated after a timeout."""
        check_name("stream", name)
        self.api.request(f"STREAM.DELETE.{name}")

    def streams(self, subject: str | None = None) -> Iterator[StreamInfo]:
        """Every stream's info (or those capturing ``subject``), fetched page by page."""
        body = {} if subject is None else {"subject": check_subject("subject", subject, wildcards=True)}
        for item in self.api.paged("STREAM.LIST", "streams", body):
            yield StreamInfo.from_json(item)

    def stream_names(self, subject: str | None = None) -> Iterator[str]:
        """Every stream's name (or those capturing ``subject``), fetched page by page."""
        body = {} if subject is None else {"subject": check_subject("subject", subject, wildcards=True)}
        yield from self.api.paged("STREAM.NAMES", "streams", body)

    def find_stream_name(self, subject: str) -> str:
        """The stream that captures ``subject``; StreamNotFoundError when none does."""
        for name in self.stream_names(subject):
            return str(name)
        raise errors.StreamNotFoundError(
            404,
            10059,
            f"no stream captures subject {subject!r}; create one whose subjects include it, e.g. "
            f"js.create_stream(StreamConfig(name=..., subjects=[{subject!r}]))",
        )

    def account_info(self) -> AccountInfo:
        """This account's JetStream usage and limits (memory, storage, streams, consumers, API calls, and in
        ``api.level`` the JetStream API level of the server that answered)."""
        return AccountInfo.from_json(self.api.request("INFO"))

    @property
    def server_api_level(self) -> int:
        """The JetStream API level (ADR-44) the connected server advertises (``api_lvl`` in its INFO; 0 from a
        server older than 2.12): nats.go's ``nc.ConnectedServerJetStream()``. Asks nothing."""
        return server_api_level(self._runtime.server_info())

    # -- consumers --------------------------------------------------------------------------------------
    def _consumer_request(self, stream: str, config: ConsumerConfig, action: str) -> ConsumerInfo:
        check_name("stream", stream)
        if not isinstance(config, ConsumerConfig):
            raise errors.InvalidTypeError("config", f"must be a ConsumerConfig, got {type(config).__name__}")
        name = config.name or config.durable_name
        if not name:
            name = self._runtime.new_token()
            config = attrs.evolve(config, name=name)
        level = require_features(self._runtime.server_info(), consumer_features(config))
        body: dict[str, Any] = {"stream_name": stream, "config": config.to_json()}
        if action:
            body["action"] = action
        response = self.api.request(f"CONSUMER.CREATE.{stream}.{name}", body, required_api_level=level)
        return ConsumerInfo.from_json(response)

    def create_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Create a consumer; ConsumerExistsError when it exists with a different configuration.

        A config without name or durable_name makes an ephemeral consumer with a generated name.
        """
        return Consumer(self, self._consumer_request(stream, config, "create"))

    def update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Update a consumer; ConsumerNotFoundError when it does not exist."""
        return Consumer(self, self._update_consumer(stream, config))

    def _update_consumer(self, stream: str, config: ConsumerConfig) -> ConsumerInfo:
        if not (config.name or config.durable_name):
            raise errors.InvalidArgumentError("config.name", "update_consumer needs the consumer's name")
        try:
            return self._consumer_request(stream, config, "update")
        except errors.APIError as exc:
            if exc.err_code == 10149:  # consumer does not exist
                name = config.name or config.durable_name
                raise errors.ConsumerNotFoundError(exc.code, exc.err_code, exc.description, stream, name) from None
            raise

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Create the pull consumer, or update it to ``config`` when it exists."""
        return Consumer(self, self._consumer_request(stream, config, ""))

    # -- push consumers -------------------------------------------------------------------------------------
    def create_push_consumer(self, stream: str, config: ConsumerConfig) -> PushConsumer:
        """Create a push consumer (``config.deliver_subject`` set); ConsumerExistsError when it exists with a
        different configuration. A deliver_group with flow control or heartbeats is refused before sending."""
        check_push_config(config)
        return PushConsumer(self, self._consumer_request(stream, config, "create"))

    def update_push_consumer(self, stream: str, config: ConsumerConfig) -> PushConsumer:
        """Update an existing push consumer to ``config``; ConsumerNotFoundError when there is none."""
        check_push_config(config)
        return PushConsumer(self, self._update_consumer(stream, config))

    def create_or_update_push_consumer(self, stream: str, config: ConsumerConfig) -> PushConsumer:
        """Create the push consumer, or update it to ``config`` when it exists."""
        check_push_config(config)
        return PushConsumer(self, self._consumer_request(stream, config, ""))

    def push_consumer(self, stream: str, name: str) -> PushConsumer:
        """A handle on an existing push consumer; PullSubscribeRequiredError when it is a pull consumer."""
        try:
            info = self.consumer_info(stream, name)
        except errors.ConsumerNotFoundError as exc:  # say how to create a push consumer, not a pull one
            raise errors.ConsumerNotFoundError(
                exc.code, exc.err_code, exc.description, stream, name, push=True
            ) from None
        if not info.config.deliver_subject:
            raise errors.PullSubscribeRequiredError(
                f"{stream}/{name} is a pull consumer (no deliver_subject); use js.consumer() and fetch or consume"
            )
        return PushConsumer(self, info)

    def ordered_push_consumer(
        self, stream: str, config: OrderedConsumerConfig | None = None, *, idle_heartbeat: float = 5.0
    ) -> OrderedPushConsumer:
        """An ordered read of ``stream`` over push delivery (flow control, heartbeats every ``idle_heartbeat``
        seconds, no acks); the server-side consumer is created when reading starts."""
        check_name("stream", stream)
        return OrderedPushConsumer(
            self, stream, OrderedConsumerConfig() if config is None else config, idle_heartbeat=idle_heartbeat
        )

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on an existing consumer (its info is fetched); ConsumerNotFoundError otherwise."""
        return Consumer(self, self.consumer_info(stream, name))

    def ordered_consumer(self, stream: str, config: OrderedConsumerConfig | None = None) -> OrderedConsumer:
        """An ordered read of ``stream``: in order, gap-free, no acks, recreated after any fault (as nats.go's
        OrderedConsumer). Creates its first server-side consumer now: StreamNotFoundError if there is no
        stream."""
        check_name("stream", stream)
        return OrderedConsumer(self, stream, OrderedConsumerConfig() if config is None else config)

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        """The consumer's info, asked now; ConsumerNotFoundError when there is no such consumer."""
        check_name("stream", stream)
        check_name("name", name)
        return ConsumerInfo.from_json(self.api.request(f"CONSUMER.INFO.{stream}.{name}"))

    def delete_consumer(self, stream: str, name: str) -> None:
        """Delete the consumer; ConsumerNotFoundError when there is no such consumer."""
        check_name("stream", stream)
        check_name("name", name)
        self.api.request(f"CONSUMER.DELETE.{stream}.{name}")

    def pause_consumer(self, stream: str, name: str, until: datetime) -> ConsumerPauseState:
        """Stop delivery from a consumer until ``until`` (a timezone-aware datetime), then resume by itself.

        Pull requests wait meanwhile, a push consumer sends nothing. nats-server 2.11 or later
        (FeatureNotSupportedError before sending on an older one). A time in the past leaves it running.
        """
        check_name("stream", stream)
        check_name("name", name)
        if not isinstance(until, datetime):
            raise errors.InvalidTypeError("until", f"must be a datetime, got {type(until).__name__}")
        body = ConsumerPauseRequest(pause_until=until).to_json()
        return self._pause_request(stream, name, body, "pausing a consumer")

    def resume_consumer(self, stream: str, name: str) -> ConsumerPauseState:
        """End a consumer's pause now. nats-server 2.11 or later."""
        check_name("stream", stream)
        check_name("name", name)
        return self._pause_request(stream, name, ConsumerPauseRequest().to_json(), "resuming a consumer")

    def reset_consumer(self, stream: str, name: str, sequence: int | None = None) -> ConsumerInfo:
        """Move a consumer back (or forward): it delivers from stream sequence ``sequence`` next, or, without
        one, from just after its ack floor (what was delivered and not acked comes again). Its pending acks are
        dropped. nats-server 2.14 or later. Returns the consumer's info; ``reset_seq`` is where it restarts."""
        check_name("stream", stream)
        check_name("name", name)
        body = None if sequence is None else {"seq": check_int("sequence", sequence, minimum=1)}
        require_server(self._runtime.server_info(), "resetting a consumer", (2, 14, 0))
        try:
            return ConsumerInfo.from_json(self.api.request(f"CONSUMER.RESET.{stream}.{name}", body))
        except errors.TimeoutError:
            # nats-server 2.15 does not answer a reset of a consumer it does not have: ask, so that the caller
            # gets ConsumerNotFoundError (or StreamNotFoundError) rather than a bare timeout
            self.consumer_info(stream, name)
            raise

    def unpin_consumer(self, stream: str, name: str, group: str) -> None:
        """Take the pin of priority group ``group`` from the client holding it (ADR-42 PINNED_CLIENT): the next
        pull of any client of the group gets it. nats-server 2.11 or later."""
        check_name("stream", stream)
        check_name("name", name)
        check_priority_group("group", group)
        require_server(self._runtime.server_info(), "unpinning a consumer", (2, 11, 0))
        self.api.request(f"CONSUMER.UNPIN.{stream}.{name}", {"group": group})

    def _pause_request(self, stream: str, name: str, body: dict[str, Any], what: str) -> ConsumerPauseState:
        require_server(self._runtime.server_info(), what, (2, 11, 0))
        return ConsumerPauseState.from_json(self.api.request(f"CONSUMER.PAUSE.{stream}.{name}", body))

    def consumers(self, stream: str) -> Iterator[ConsumerInfo]:
        """Every consumer's info on ``stream``, fetched page by page."""
        check_name("stream", stream)
        for item in self.api.paged(f"CONSUMER.LIST.{stream}", "consumers", {}):
            yield ConsumerInfo.from_json(item)

    def consumer_names(self, stream: str) -> Iterator[str]:
        """Every consumer's name on ``stream``, fetched page by page."""
        check_name("stream", stream)
        yield from self.api.paged(f"CONSUMER.NAMES.{stream}", "consumers", {})

    # -- publishing -------------------------------------------------------------------------------------
    def publish(
        self,
        subject: str,
        data: object = b"",
        headers: HeadersInput | None = None,
        *,
        timeout: float | timedelta | None = None,
        options: PublishOptions | None = None,
        codec: Codec[Any] | None = None,
        **checks: Any,
    ) -> PubAck:
        """Publish and wait for the stream's acknowledgement. ``duplicate`` is True for a dedup hit.

        The keywords ``msg_id``, ``expected_stream``, ``expected_last_sequence``,
        ``expected_last_subject_sequence`` (narrowed by ``expected_last_subject_sequence_subject``) and
        ``expected_last_msg_id`` (or ``options=PublishOptions(...)``)
        add the stream-side checks of [`PublishOptions`][jetstream_sync.PublishOptions]; ``ttl``, ``schedule`` and
        ``trace_dest`` are there too. With ``msg_id`` a publish retried after an error is stored once inside the
        duplicate window. With ``codec`` (see `jetstream_sync.codecs`) ``data`` is an object, sent encoded.
        """
        self._runtime.check_usable()
        data = payload_of(data, codec)
        seconds = check_timeout(timeout, self.timeout)
        opts = _publish_options(options, checks, subject, self._runtime)
        telemetry = _telemetry.ACTIVE
        if telemetry is not None:
            return telemetry.publish(
                subject,
                _size(data),
                opts.msg_id,
                lambda trace: self._publish(subject, data, headers, opts, seconds, [*opts.headers(), *trace]),
            )
        return self._publish(subject, data, headers, opts, seconds, opts.headers())

    def _publish(
        self,
        subject: str,
        data: bytes,
        headers: HeadersInput | None,
        opts: PublishOptions,
        seconds: float,
        extra: list[tuple[bytes, bytes]],
    ) -> PubAck:
        encode = reply_encoder(*prepare_message(subject, data, headers, self._runtime.max_payload, extra))
        what = f"publish to {subject!r}"
        if opts.msg_id is not None:
            return parse_pub_ack(self._publish_deduplicated(encode, seconds, what, subject).data)
        deadline = time.monotonic() + seconds
        try:
            reply = self._runtime.request(encode, seconds, what)
        except errors.NoRespondersError:
            reply = self._retry_no_responders(encode, deadline, what, subject)
        return parse_pub_ack(reply.data)

    def _publish_deduplicated(
        self, encode: Callable[[bytes], Command], seconds: float, what: str, subject: str
    ) -> RawReply:
        """A publish with a msg_id may be sent again when it goes unanswered (its stream's leader was lost in an
        election): the stream stores it once, and a repeat that finds it stored is acked with ``duplicate``.
        So each attempt gets a share of the timeout and the API retry policy repeats a timed-out one."""
        deadline = time.monotonic() + seconds

        def attempt() -> RawReply:
            return self._runtime.request(encode, split_timeout(seconds, deadline), what)

        try:
            return retry_within(self.api.retry, deadline, seconds, what, attempt)
        except errors.NoRespondersError:
            return self._retry_no_responders(encode, deadline, what, subject, attempt)

    def _retry_no_responders(
        self,
        encode: Callable[[bytes], Command],
        deadline: float,
        what: str,
        subject: str,
        attempt: Callable[[], RawReply] | None = None,
    ) -> RawReply:
        """Try again as ``publish_retry`` says, but inside the publish's one timeout (``within_deadline``).

        ``attempt`` comes from a publish with a msg_id, which may be repeated after a timeout too. Without one,
        a timed-out attempt is not repeated (it may have been stored), so an attempt may use all the time left.
        """
        repeatable: tuple[type[errors.JetStreamError], ...] = (errors.NoRespondersError, errors.TimeoutError)
        if attempt is None:
            repeatable = (errors.NoRespondersError,)

            def attempt() -> RawReply:
                return self._runtime.request(encode, max(0.0, deadline - time.monotonic()), what)

        try:
            return within_deadline(self._retry, deadline)(attempt)
        except errors.NoRespondersError:
            pass
        # Out of quick tries. A stream that captures the subject but does not answer is electing a leader (a
        # cluster) or restarting: keep trying within the timeout. No such stream: say so now.
        api_silent: errors.JetStreamNotEnabledError | None = None
        try:
            left = max(0.05, deadline - time.monotonic())
            names = self.api.request("STREAM.NAMES", {"subject": subject}, timeout=left).get("streams") or []
            if not names:
                raise errors.StreamNotFoundError(
                    404,
                    10059,
                    f"no stream captures subject {subject!r}; create one whose subjects include it, e.g. "
                    f"js.create_stream(StreamConfig(name=..., subjects=[{subject!r}]))",
                )
        except errors.StreamNotFoundError:
            raise errors.NoStreamResponseError(
                f"no stream answered a publish to {subject!r}: no stream captures this subject; create a stream "
                "whose subjects match it"
            ) from None
        except errors.JetStreamNotEnabledError as exc:
            api_silent = exc  # no JetStream here, or a server still starting it: try on, and say which at the end
        except errors.JetStreamError:
            pass  # the JetStream API does not answer either (its meta leader is being elected): try on
        delay = 0.25
        while True:
            if time.monotonic() + delay >= deadline:
                if api_silent is not None:
                    raise errors.JetStreamNotEnabledError(
                        503,
                        0,
                        f"no stream answered a publish to {subject!r}, and the JetStream API did not answer either: "
                        "JetStream is not enabled for this account or server",
                    )
                raise errors.NoRespondersError(
                    f"the stream for {subject!r} did not answer a publish in time (a leader election or restart "
                    "that outlasted the timeout); publish again, with a msg_id to be safe"
                )
            time.sleep(delay)  # the pause between tries, bounded by the publish's timeout
            try:
                return attempt()
            except repeatable:
                delay = min(1.0, delay * 2)

    def publish_async(
        self,
        subject: str,
        data: object = b"",
        headers: HeadersInput | None = None,
        *,
        timeout: float | timedelta | None = None,
        options: PublishOptions | None = None,
        codec: Codec[Any] | None = None,
        **checks: Any,
    ) -> concurrent.futures.Future[PubAck]:
        """Publish without waiting; the future resolves with the PubAck or an error, always.

        Takes the same checks as [`publish`][jetstream_sync.JetStream.publish]. At most ``max_pending`` publishes are in
        flight; past that this call blocks (back-pressure) and raises PublishBackpressureError after ``stall_timeout``.
        A future whose ack does not come within ``timeout`` fails with TimeoutError; on disconnect in-flight futures
        fail with NotConnectedError. "No responders" (JetStream restarting, or no stream for the subject) is tried 4
        times over about 0.35 s before the future fails with NoRespondersError. ``codec`` as ``publish``.
        """
        self._runtime.check_usable()
        data = payload_of(data, codec)
        opts = _publish_options(options, checks, subject, self._runtime)
        telemetry = _telemetry.ACTIVE
        if telemetry is not None:
            return telemetry.publish_async(
                subject,
                _size(data),
                opts.msg_id,
                lambda trace: self._publisher.submit(
                    prepare_message(subject, data, headers, self._runtime.max_payload, [*opts.headers(), *trace]),
                    timeout,
                ),
            )
        return self._publisher.submit(
            prepare_message(subject, data, headers, self._runtime.max_payload, opts.headers()), timeout
        )

    def atomic_batch(self, *, batch_id: str | None = None, timeout: float | timedelta | None = None) -> AtomicBatch:
        """A batch of messages stored all together or not at all (ADR-50, nats-server 2.12+, on a stream with
        ``allow_atomic_publish``): ``with js.atomic_batch() as batch: batch.add(subject, data)``, then
        ``batch.ack`` is the [`BatchAck`][jetstream_sync.models.BatchAck]. See
        [`AtomicBatch`][jetstream_sync.AtomicBatch]."""
        return AtomicBatch(self, batch_id=batch_id, timeout=timeout)

    def fast_publisher(
        self,
        *,
        flow: int = 100,
        max_outstanding_acks: int = 2,
        continue_on_gap: bool = False,
        timeout: float | timedelta | None = None,
        error_handler: Callable[[BaseException], object] | None = None,
    ) -> FastPublisher:
        """A fast-ingest batch (nats-server 2.14+, a stream with ``allow_batched``): ``add`` streams messages
        acknowledged every ``flow`` in bulk, ``commit`` / ``close`` end it with a
        [`BatchAck`][jetstream_sync.models.BatchAck]. See [`FastPublisher`][jetstream_sync.FastPublisher]."""
        return FastPublisher(
            self,
            flow=flow,
            max_outstanding_acks=max_outstanding_acks,
            continue_on_gap=continue_on_gap,
            timeout=timeout,
            error_handler=error_handler,
        )

    def cancel_schedule(self, subject: str, stream: str | None = None) -> bool:
        """Remove the message schedule on ``subject`` (in ``stream``, or the stream that holds the subject):
        it fires no more. False when there was none."""
        check_subject("subject", subject)
        name = stream if stream is not None else self.find_stream_name(subject)
        return self.stream(name).purge(subject=subject) > 0

    def publish_async_pending(self) -> int:
        """How many asynchronous publishes wait for their ack."""
        return self._publisher.pending

    def publish_async_complete(self, timeout: float | timedelta | None = None) -> None:
        """Wait until every asynchronous publish has resolved; TimeoutError otherwise."""
        self._runtime.check_usable()
        self._publisher.complete(check_timeout(timeout, self.timeout))

    # -- the ADR-15 / ADR-13 subscribe API (nats-py's calls, blocking) ------------------------------------
    # -- what the server says -----------------------------------------------------------------------------
    def dead_letter(
        self,
        stream: str,
        consumer: str,
        *,
        to: str,
        delete: bool = False,
        durable: bool = True,
        events_stream: str | None = None,
    ) -> DeadLetters:
        """Move the messages ``consumer`` gives up on (max deliveries, or ``term()``) to subject ``to``, with
        headers naming the stream, consumer, sequence, subject, delivery count and reason; with ``delete``
        also remove them from ``stream``. Runs until ``stop()``. With ``durable`` (the default) the advisories
        are kept in a work-queue stream (``events_stream``, default ``DLQ_EVENTS_<stream>_<consumer>``), so
        none is lost while no mover runs; see [`DeadLetters`][jetstream_sync.DeadLetters]."""
        return DeadLetters(self, stream, consumer, to=to, delete=delete, durable=durable, events_stream=events_stream)

    def advisories(
        self,
        stream: str | None = None,
        consumer: str | None = None,
        kinds: Iterable[AdvisoryKind | str] | None = None,
    ) -> Advisories:
        """Typed events from ``$JS.EVENT.ADVISORY.>`` and ``$JS.EVENT.METRIC.>``, narrowed to ``stream``,
        ``consumer`` and ``kinds`` ([`AdvisoryKind`][jetstream_sync.models.AdvisoryKind] members or their values); use
        it as a context manager and iterate (see [`Advisories`][jetstream_sync.Advisories])."""
        return open_advisories(self, stream=stream, consumer=consumer, kinds=kinds)


def _size(data: object) -> int:
    """The payload size a span reports (a payload of the wrong type is refused later, by prepare_message)."""
    return len(data) if isinstance(data, (bytes, bytearray, memoryview)) else 0


def _publish_options(
    options: PublishOptions | None, checks: dict[str, Any], subject: str, runtime: Runtime
) -> PublishOptions:
    """The checks of one publish, from ``options=`` or the keywords (the common case, none, costs nothing)."""
    if options is None and not checks:
        return NO_CHECKS
    opts = options_from(PublishOptions, options, checks, "publish")
    if opts.schedule is not None:
        opts.schedule.check_for(subject)
        require_server(runtime.server_info(), "this message schedule", opts.schedule.needs)
    if opts.trace_dest is not None:
        require_server(runtime.server_info(), "message tracing (trace_dest)", (2, 11, 0))
    return opts
