"""JetStreamAPI: requests to the JetStream API (``$JS.API.>``), with typed errors, shared by the context and handles.

Every management call (streams, consumers, account info, message get/delete) goes through :meth:`request`;
it is public (``js.api``) so that an application can reach an API this client does not wrap yet, with the same
error mapping, timeouts and domain handling.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import errors
from .._protocol import api_payload, api_response, reply_encoder
from .._runtime import RawReply, Runtime
from .._validate import check_timeout, prepare_message
from ..client import Client

__all__ = ["JetStreamAPI"]


class _Ignore:
    """The reply handler of a request nobody waits for."""

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        return

    def fail(self, exc: BaseException) -> None:
        return


_IGNORE = _Ignore()


class JetStreamAPI:
    """The JetStream API of one account or domain: ``prefix`` (``$JS.API`` or ``$JS.<domain>.API``) and the
    default ``timeout`` of its requests."""

    def __init__(self, client: Client, prefix: str, timeout: float) -> None:
        self.client = client
        self.runtime: Runtime = client.runtime
        self.prefix = prefix
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"<JetStreamAPI {self.prefix!r}>"

    def subject(self, suffix: str) -> str:
        """The full API subject of ``suffix`` (e.g. ``STREAM.INFO.orders``)."""
        return f"{self.prefix}.{suffix}"

    def request(self, suffix: str, body: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """One API request; the decoded JSON response, or the typed APIError the server answered with."""
        subject = self.subject(suffix)
        reply = self.request_raw(subject, body, timeout)
        return api_response(reply.data, subject)

    def request_raw(self, subject: str, body: dict[str, Any] | None, timeout: float | None = None) -> RawReply:
        """A request to any JetStream subject, the reply as it came; "no responders" means JetStream is not there."""
        runtime = self.runtime
        runtime.check_usable()
        seconds = check_timeout(timeout, self.timeout)
        encode = reply_encoder(*prepare_message(subject, api_payload(body), None, runtime.max_payload))
        try:
            return runtime.request(encode, seconds, f"JetStream API {subject}")
        except errors.NoRespondersError:
            raise errors.JetStreamNotEnabledError(
                503, 0, f"no responders on {subject}: JetStream is not enabled for this account or server"
            ) from None

    async def request_io(
        self, suffix: str, body: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """IO thread only: the same request as :meth:`request`, awaited on the client's loop.

        For engines that live on the IO thread (an ordered consumer recreating its server-side consumer) and
        must not block it. Raises what :meth:`request` raises.
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
