"""The JetStream context: streams, consumers, account info and publishing (ADR-37 "JetStream Context")."""

from __future__ import annotations

import concurrent.futures
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs
import tenacity
from nats.nuid import NUID

from . import errors
from ._validate import check_int, check_name, check_subject, check_timeout, to_seconds
from .consumer import Consumer
from .headers import HeadersInput
from .message import Msg
from .models import AccountInfo, ConsumerConfig, ConsumerInfo, PubAck, StreamConfig, StreamInfo
from .publish import DEFAULT_MAX_PENDING, AsyncPublisher, default_publish_retry, js_publish_headers, parse_pub_ack
from .stream import Stream

if TYPE_CHECKING:
    from .client import Client

__all__ = ["JetStream"]

log = logging.getLogger("jetstream_sync")


class JetStream:
    """Manage streams and consumers, and publish with acknowledgements. Thread-safe; cheap to create.

    ``publish_retry`` is a ``tenacity.Retrying`` deciding how "no responders" (503) is retried by
    ``publish``; the default tries 4 times over about 0.3 s.
    """

    def __init__(
        self,
        client: Client,
        *,
        timeout: float | timedelta | None = None,
        domain: str | None = None,
        api_prefix: str | None = None,
        publish_retry: tenacity.Retrying | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        stall_timeout: float = 10.0,
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
        if publish_retry is not None and not isinstance(publish_retry, tenacity.Retrying):
            raise errors.InvalidTypeError("publish_retry", "must be a tenacity.Retrying")
        self.client = client
        self.api_prefix = prefix
        self.domain = domain
        self.timeout = check_timeout(timeout, client.default_timeout)
        self._retry = publish_retry or default_publish_retry()
        self._publisher = AsyncPublisher(
            client,
            max_pending=check_int("max_pending", max_pending, minimum=1),
            ack_timeout=self.timeout,
            stall_timeout=to_seconds("stall_timeout", stall_timeout),
        )

    def __repr__(self) -> str:
        return f"<JetStream api_prefix={self.api_prefix!r}>"

    # -- the API request path ---------------------------------------------------------------------------
    def _api(self, suffix: str, body: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """One JetStream API request; errors come back as typed APIError subclasses."""
        subject = f"{self.api_prefix}.{suffix}"
        return self._decode(self._request(subject, body, timeout), subject)

    def _request(self, subject: str, body: dict[str, Any] | None, timeout: float | None = None) -> Msg:
        """A request to the JetStream API, the raw reply; "no responders" means JetStream is not there."""
        client = self.client
        client._check_usable()
        seconds = check_timeout(timeout, self.timeout)
        payload = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        encode = client.prepare_publish(subject, payload, None)
        try:
            return client._request(encode, seconds, f"JetStream API {subject}")
        except errors.NoRespondersError:
            raise errors.JetStreamNotEnabledError(
                503, 0, f"no responders on {subject}: JetStream is not enabled for this account or server"
            ) from None

    @staticmethod
    def _decode(msg: Msg, subject: str) -> dict[str, Any]:
        try:
            response = json.loads(msg.data)
        except ValueError as exc:
            raise errors.JetStreamError(f"invalid JSON from {subject}: {msg.data[:200]!r}") from exc
        if not isinstance(response, dict):
            raise errors.JetStreamError(f"unexpected reply from {subject}: {msg.data[:200]!r}")
        error = response.get("error")
        if error:
            raise errors.api_error(
                int(error.get("code", 0)), int(error.get("err_code", 0)), str(error.get("description", ""))
            )
        return response

    def _paged(self, suffix: str, key: str, body: dict[str, Any]) -> Iterator[Any]:
        """Yield items of a paged list API, fetching the next page only when needed."""
        offset = 0
        while True:
            page = self._api(suffix, {**body, "offset": offset})
            items = page.get(key) or []
            yield from items
            offset += len(items)
            total = int(page.get("total", 0))
            if not items or offset >= total:
                return

    # -- streams ----------------------------------------------------------------------------------------
    def _stream_request(self, action: str, config: StreamConfig) -> Stream:
        if not isinstance(config, StreamConfig):
            raise errors.InvalidTypeError("config", f"must be a StreamConfig, got {type(config).__name__}")
        info = StreamInfo.from_json(self._api(f"STREAM.{action}.{config.name}", config.to_json()))
        return Stream(self, info)

    def create_stream(self, config: StreamConfig) -> Stream:
        """Create a stream; StreamNameInUseError when it exists with a different configuration."""
        return self._stream_request("CREATE", config)

    def update_stream(self, config: StreamConfig) -> Stream:
        """Update a stream; StreamNotFoundError when it does not exist."""
        return self._stream_request("UPDATE", config)

    def create_or_update_stream(self, config: StreamConfig) -> Stream:
        try:
            return self.update_stream(config)
        except errors.StreamNotFoundError:
            return self.create_stream(config)

    def stream(self, name: str) -> Stream:
        """A handle on an existing stream (its info is fetched); StreamNotFoundError otherwise."""
        return Stream(self, self.stream_info(name))

    def stream_info(self, name: str) -> StreamInfo:
        check_name("stream", name)
        return StreamInfo.from_json(self._api(f"STREAM.INFO.{name}"))

    def delete_stream(self, name: str) -> None:
        check_name("stream", name)
        self._api(f"STREAM.DELETE.{name}")

    def streams(self, subject: str | None = None) -> Iterator[StreamInfo]:
        """Every stream's info (or those capturing ``subject``), fetched page by page."""
        body = {} if subject is None else {"subject": check_subject("subject", subject, wildcards=True)}
        for item in self._paged("STREAM.LIST", "streams", body):
            yield StreamInfo.from_json(item)

    def stream_names(self, subject: str | None = None) -> Iterator[str]:
        body = {} if subject is None else {"subject": check_subject("subject", subject, wildcards=True)}
        yield from self._paged("STREAM.NAMES", "streams", body)

    def find_stream_name(self, subject: str) -> str:
        """The stream that captures ``subject``; StreamNotFoundError when none does."""
        for name in self.stream_names(subject):
            return str(name)
        raise errors.StreamNotFoundError(404, 10059, f"no stream captures subject {subject!r}")

    def account_info(self) -> AccountInfo:
        return AccountInfo.from_json(self._api("INFO"))

    # -- consumers --------------------------------------------------------------------------------------
    def _consumer_request(self, stream: str, config: ConsumerConfig, action: str) -> Consumer:
        check_name("stream", stream)
        if not isinstance(config, ConsumerConfig):
            raise errors.InvalidTypeError("config", f"must be a ConsumerConfig, got {type(config).__name__}")
        name = config.name or config.durable_name
        if not name:
            name = NUID().next().decode()
            config = attrs.evolve(config, name=name)
        body: dict[str, Any] = {"stream_name": stream, "config": config.to_json()}
        if action:
            body["action"] = action
        info = ConsumerInfo.from_json(self._api(f"CONSUMER.CREATE.{stream}.{name}", body))
        return Consumer(self, info)

    def create_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Create a consumer; ConsumerExistsError when it exists with a different configuration.

        A config without name or durable_name makes an ephemeral consumer with a generated name.
        """
        return self._consumer_request(stream, config, "create")

    def update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Update a consumer; ConsumerNotFoundError when it does not exist."""
        if not (config.name or config.durable_name):
            raise errors.InvalidArgumentError("config.name", "update_consumer needs the consumer's name")
        try:
            return self._consumer_request(stream, config, "update")
        except errors.APIError as exc:
            if exc.err_code == 10149:  # consumer does not exist
                raise errors.ConsumerNotFoundError(exc.code, exc.err_code, exc.description) from None
            raise

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        return self._consumer_request(stream, config, "")

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on an existing consumer (its info is fetched); ConsumerNotFoundError otherwise."""
        return Consumer(self, self.consumer_info(stream, name))

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        check_name("stream", stream)
        check_name("name", name)
        return ConsumerInfo.from_json(self._api(f"CONSUMER.INFO.{stream}.{name}"))

    def delete_consumer(self, stream: str, name: str) -> None:
        check_name("stream", stream)
        check_name("name", name)
        self._api(f"CONSUMER.DELETE.{stream}.{name}")

    def consumers(self, stream: str) -> Iterator[ConsumerInfo]:
        check_name("stream", stream)
        for item in self._paged(f"CONSUMER.LIST.{stream}", "consumers", {}):
            yield ConsumerInfo.from_json(item)

    def consumer_names(self, stream: str) -> Iterator[str]:
        check_name("stream", stream)
        yield from self._paged(f"CONSUMER.NAMES.{stream}", "consumers", {})

    # -- publishing -------------------------------------------------------------------------------------
    def publish(
        self,
        subject: str,
        data: bytes = b"",
        headers: HeadersInput | None = None,
        *,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_sequence: int | None = None,
        expected_last_subject_sequence: int | None = None,
        expected_last_msg_id: str | None = None,
        timeout: float | timedelta | None = None,
    ) -> PubAck:
        """Publish and wait for the stream's acknowledgement. ``duplicate`` is True for a dedup hit.

        With ``msg_id`` a publish retried after an error is stored once inside the duplicate window.
        """
        client = self.client
        client._check_usable()
        seconds = check_timeout(timeout, self.timeout)
        extra = js_publish_headers(
            msg_id, expected_stream, expected_last_sequence, expected_last_subject_sequence, expected_last_msg_id
        )
        encode = client.prepare_publish(subject, data, headers, extra)
        what = f"publish to {subject!r}"
        try:
            msg = client._request(encode, seconds, what)
        except errors.NoRespondersError:
            msg = self._retry_no_responders(encode, seconds, what, subject)
        return parse_pub_ack(msg.data)

    def _retry_no_responders(self, encode: Any, seconds: float, what: str, subject: str) -> Msg:
        retry = self._retry.copy()
        try:
            return retry(self.client._request, encode, seconds, what)
        except errors.NoRespondersError:
            raise errors.NoStreamResponseError(
                f"no stream answered a publish to {subject!r}: no stream captures this subject (or JetStream "
                "is not available); create a stream whose subjects match it"
            ) from None

    def publish_async(
        self,
        subject: str,
        data: bytes = b"",
        headers: HeadersInput | None = None,
        *,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_sequence: int | None = None,
        expected_last_subject_sequence: int | None = None,
        expected_last_msg_id: str | None = None,
        timeout: float | timedelta | None = None,
    ) -> concurrent.futures.Future[PubAck]:
        """Publish without waiting; the future resolves with the PubAck or an error, always.

        At most ``max_pending`` publishes are in flight; past that this call blocks (back-pressure) and
        raises PublishBackpressureError after ``stall_timeout``. A future whose ack does not come within
        ``timeout`` fails with TimeoutError; on disconnect in-flight futures fail with NotConnectedError.
        "No responders" (JetStream restarting, or no stream for the subject) is tried 4 times over about 0.35 s
        before the future fails with NoRespondersError.
        """
        client = self.client
        client._check_usable()
        extra = js_publish_headers(
            msg_id, expected_stream, expected_last_sequence, expected_last_subject_sequence, expected_last_msg_id
        )
        return self._publisher.submit(client.prepare_message(subject, data, headers, extra), timeout)

    def publish_async_pending(self) -> int:
        """How many asynchronous publishes wait for their ack."""
        return self._publisher.pending

    def publish_async_complete(self, timeout: float | timedelta | None = None) -> None:
        """Wait until every asynchronous publish has resolved; TimeoutError otherwise."""
        self.client._check_usable()
        self._publisher.complete(check_timeout(timeout, self.timeout))
