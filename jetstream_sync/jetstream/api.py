"""JetStreamAPI: requests to the JetStream API (``$JS.API.>``), with typed errors, shared by the context and handles.

Every management call (streams, consumers, account info, message get/delete) goes through `request`;
it is public (``js.api``) so that an application can reach an API this client does not wrap yet, with the same
error mapping, timeouts and domain handling.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import tenacity

from .. import _telemetry, errors
from .._protocol import api_payload, api_response, reply_encoder
from .._runtime import ProcessLocal, RawReply, Runtime
from .._validate import check_int, check_timeout, prepare_message
from ..subscription import Subscription
from ._features import API_LEVEL_HEADER, require_api_level
from .retry import default_api_retry, is_idempotent_api, retry_within, split_timeout

__all__ = ["JetStreamAPI"]


class _Ignore:
    """The reply handler of a request nobody waits for."""

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        return

    def fail(self, exc: BaseException) -> None:
        return


_IGNORE = _Ignore()


class JetStreamAPI(ProcessLocal):
    """The JetStream API of one account or domain: ``prefix`` (``$JS.API`` or ``$JS.<domain>.API``), the
    default ``timeout`` of its requests, and ``retry``, the policy that carries an idempotent request through a
    cluster election (see `jetstream_sync.jetstream.retry`). It talks to the client's
    [`Runtime`][jetstream_sync.Runtime] port (``client.runtime``), never to the client itself.
    """

    def __init__(self, runtime: Runtime, prefix: str, timeout: float, retry: tenacity.Retrying | None = None) -> None:
        #: the client's runtime port: every request goes through it, and the server's INFO is read from it
        self.runtime = runtime
        self.prefix = prefix
        self.timeout = timeout
        self.retry = retry or default_api_retry()

    def __repr__(self) -> str:
        return f"<JetStreamAPI {self.prefix!r}>"

    def subject(self, suffix: str) -> str:
        """The full API subject of ``suffix`` (e.g. ``STREAM.INFO.orders``)."""
        return f"{self.prefix}.{suffix}"

    def request(
        self,
        suffix: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
        *,
        idempotent: bool | None = None,
        required_api_level: int | None = None,
    ) -> dict[str, Any]:
        """One API request; the decoded JSON response, or the typed APIError the server answered with.

        A request that may be repeated safely (``idempotent``; by default judged from ``suffix``: reads, and
        creates and updates that name what they make) is retried by [`retry`][jetstream_sync.JetStreamAPI.retry] when it
        meets an election (ClusterUnavailableError, or no answer), every attempt and pause inside ``timeout``. Others
        are sent once.

        ``required_api_level`` (ADR-44) is sent as the ``Nats-Required-Api-Level`` header: the server that
        answers refuses the request unprocessed (RequiredApiLevelError) when its JetStream API level is lower.
        The connected server's own level is checked first (FeatureNotSupportedError, nothing sent).
        """
        extra: tuple[tuple[bytes, bytes], ...] = ()
        if required_api_level is not None:
            level = check_int("required_api_level", required_api_level, minimum=1)
            require_api_level(self.runtime.server_info(), level, f"a request needing JetStream API level {level}")
            extra = ((API_LEVEL_HEADER, b"%d" % level),)
        telemetry = _telemetry.ACTIVE
        if telemetry is not None:
            return telemetry.request(suffix, lambda: self._request(suffix, body, timeout, idempotent, extra))
        return self._request(suffix, body, timeout, idempotent, extra)

    def _request(
        self,
        suffix: str,
        body: dict[str, Any] | None,
        timeout: float | None,
        idempotent: bool | None,
        extra: tuple[tuple[bytes, bytes], ...],
    ) -> dict[str, Any]:
        subject = self.subject(suffix)
        if not (is_idempotent_api(suffix) if idempotent is None else idempotent):
            return api_response(self.request_raw(subject, body, timeout, extra).data, subject)
        seconds = check_timeout(timeout, self.timeout)
        deadline = time.monotonic() + seconds

        def attempt() -> dict[str, Any]:
            reply = self.request_raw(subject, body, split_timeout(seconds, deadline), extra)
            return api_response(reply.data, subject)

        return retry_within(self.retry, deadline, seconds, f"JetStream API {subject}", attempt)

    def request_raw(
        self,
        subject: str,
        body: dict[str, Any] | None,
        timeout: float | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> RawReply:
        """A request to any JetStream subject, the reply as it came; "no responders" means JetStream is not there.
        ``headers``: (name, value) pairs to send with it."""
        try:
            return self.send_request(subject, body, timeout, headers)
        except errors.NoRespondersError:
            raise errors.JetStreamNotEnabledError(
                503, 0, f"no responders on {subject}: JetStream is not enabled for this account or server"
            ) from None

    def send_request(
        self,
        subject: str,
        body: dict[str, Any] | None,
        timeout: float | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> RawReply:
        """Calling thread: one request, the reply as it came, NoRespondersError as it is (for subjects such as a
        direct get, where no responder means something other than "JetStream is not enabled")."""
        runtime = self.runtime
        runtime.check_usable()
        seconds = check_timeout(timeout, self.timeout)
        encode = reply_encoder(*prepare_message(subject, api_payload(body), None, runtime.max_payload, headers))
        return runtime.request(encode, seconds, f"JetStream API {subject}")

    def publish(self, subject: str, payload: bytes, *, reply: str) -> None:
        """Any thread: a request whose answers come as messages on ``reply``, a subscription of the caller's (a
        batched direct get, a Pull(1)): sent as a core publish, coalesced with other outbound traffic, nothing
        waited for."""
        runtime = self.runtime
        runtime.check_usable()
        runtime.send(reply_encoder(*prepare_message(subject, payload, None, runtime.max_payload))(reply.encode()))

    def subscribe_replies(self, subject: str, max_pending: int) -> Subscription:
        """Calling thread: a core subscription to ``subject`` (an inbox of the caller's, wildcards allowed) for
        the answers of [`publish`][jetstream_sync.JetStreamAPI.publish], read with ``next_msg``; at most
        ``max_pending`` messages wait in it."""
        runtime = self.runtime
        runtime.check_usable()
        return Subscription.open(runtime, subject, None, max_pending, runtime.default_timeout)

    async def request_io(
        self, suffix: str, body: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """IO thread only: the same request as [`request`][jetstream_sync.JetStreamAPI.request], awaited on the client's
        loop.

        For engines that live on the IO thread (an ordered consumer recreating its server-side consumer) and
        must not block it. Raises what [`request`][jetstream_sync.JetStreamAPI.request] raises.
        """
        subject = self.subject(suffix)
        encode = reply_encoder(subject.encode(), None, api_payload(body))
        seconds = self.timeout if timeout is None else timeout
        try:
            reply = await self.runtime.request_async(encode, seconds, f"JetStream API {subject}")
        except errors.NoRespondersError:
            raise errors.JetStreamNotEnabledError(
                503, 0, f"no responders on {subject}: JetStream is not available (restarting, or not enabled)"
            ) from None
        return api_response(reply.data, subject)

    def forget_soon(self, suffix: str, body: dict[str, Any] | None = None) -> None:
        """Any thread: send an API request whose answer nobody waits for (a best-effort cleanup)."""
        runtime = self.runtime
        if runtime.is_closed:
            return
        reply = runtime.expect_reply(_IGNORE, self.timeout)
        runtime.send(reply_encoder(self.subject(suffix).encode(), None, api_payload(body))(reply))

    def paged(self, suffix: str, key: str, body: dict[str, Any]) -> Iterator[Any]:
        """The items of a paged list API, fetching the next page only when needed."""
        offset = 0
        while True:
            page = self.request(suffix, {**body, "offset": offset})
            items = page.get(key) or []
            yield from items
            offset += len(items)
            total = int(page.get("total", 0))
            if not items or offset >= total:
                return
