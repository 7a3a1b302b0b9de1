"""The error hierarchy.

Everything the library raises derives from :class:`JetStreamError`, so one ``except`` catches it all.
Errors a caller branches on get their own class; every message says what to do next.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = [
    "APIError",
    "AuthorizationError",
    "BadRequestError",
    "ConnectionClosedError",
    "ConsumerDeletedError",
    "ConsumerExistsError",
    "ConsumerNotFoundError",
    "ForkedClientError",
    "InvalidAckSubjectError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "IteratorClosedError",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "MaxPayloadError",
    "MessageNotFoundError",
    "MissedHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamResponseError",
    "NotConnectedError",
    "PermissionViolationError",
    "PublishBackpressureError",
    "PullWarning",
    "PushConsumerError",
    "SlowConsumerError",
    "StreamNameInUseError",
    "StreamNotFoundError",
    "SubscriptionClosedError",
    "TimeoutError",
    "WrongLastMsgIdError",
    "WrongLastSequenceError",
]


class JetStreamError(Exception):
    """Root of every error raised by jetstream_sync."""


class TimeoutError(JetStreamError, builtins.TimeoutError):  # noqa: A001 - deliberately shadows the builtin
    """A blocking call ran out of time. Subclasses the builtin, so ``except TimeoutError`` works too."""


class ConnectionClosedError(JetStreamError):
    """The client was closed; connect again to continue."""

    def __init__(self, message: str = "the client is closed; create a new one with jetstream_sync.connect()") -> None:
        super().__init__(message)


class NoServersError(JetStreamError, ConnectionError):
    """No server could be reached when connecting; check the URL and that the server runs."""


class IteratorClosedError(JetStreamError):
    """The messages() iterator was stopped or drained and holds no more messages."""


class SubscriptionClosedError(JetStreamError):
    """The subscription was unsubscribed or drained and holds no more messages."""


class NotConnectedError(JetStreamError):
    """The connection is down and the operation cannot be buffered until it comes back."""


class ForkedClientError(JetStreamError, RuntimeError):
    """A client was used in a process forked after it connected."""

    def __init__(self) -> None:
        super().__init__(
            "this client was created in a parent process and cannot be used after fork(); "
            "connect a new client in the child (gunicorn post_fork, Celery worker_process_init, "
            "or lazily on first use in the worker)"
        )


class AuthorizationError(JetStreamError):
    """The server rejected the credentials; fix them, retrying will not help."""


class PermissionViolationError(JetStreamError):
    """The server refused a publish or subscribe for lack of permission on the subject."""


class SlowConsumerError(JetStreamError):
    """A subscription's buffer was full and messages were dropped; consume faster or raise its limits."""


class InvalidArgumentError(JetStreamError, ValueError):
    """An argument is invalid; ``field`` names it. Raised before anything is sent."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class InvalidTypeError(JetStreamError, TypeError):
    """An argument has the wrong type; ``field`` names it. Raised before anything is sent."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class MaxPayloadError(InvalidArgumentError):
    """The message is larger than the server's max_payload."""


class InvalidAckSubjectError(JetStreamError, ValueError):
    """A message's reply subject is not a JetStream ack subject, so it has no metadata and cannot be acked."""


class NoRespondersError(JetStreamError):
    """Nobody listens on the subject of a request (status 503)."""


class NoStreamResponseError(NoRespondersError):
    """No stream captured a JetStream publish (503 after retries)."""


class PublishBackpressureError(JetStreamError):
    """Too many asynchronous publishes stayed in flight for longer than the stall timeout."""


class APIError(JetStreamError):
    """The JetStream API answered with an error.

    ``code`` is the HTTP-like status, ``err_code`` the JetStream error code users branch on.
    """

    def __init__(self, code: int, err_code: int, description: str) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        super().__init__(f"{description} (code={code}, err_code={err_code})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.err_code, self.description))


class JetStreamNotEnabledError(APIError):
    """JetStream is not enabled on the server or for this account."""


class StreamNotFoundError(APIError):
    """The stream does not exist."""


class StreamNameInUseError(APIError):
    """A stream with this name exists with a different configuration; use update_stream()."""


class ConsumerNotFoundError(APIError):
    """The consumer does not exist."""


class ConsumerExistsError(APIError):
    """A consumer with this name exists with a different configuration; use update_consumer()."""


class MessageNotFoundError(APIError):
    """No message at that sequence or for that subject."""


class WrongLastSequenceError(APIError):
    """The expected last sequence of a publish did not match the stream."""


class WrongLastMsgIdError(APIError):
    """The expected last message id of a publish did not match the stream."""


class PullError(JetStreamError):
    """A pull request ended with a status that ends the fetch or consume."""

    def __init__(self, status: int, description: str, hint: str = "") -> None:
        self.status = status
        self.description = description
        text = f"{status} {description}".strip()
        super().__init__(f"{text}: {hint}" if hint else text)


class BadRequestError(PullError):
    """The server rejected the pull request (400)."""


class ConsumerDeletedError(PullError):
    """The consumer was deleted while messages were being pulled (409 Consumer Deleted)."""


class PushConsumerError(PullError):
    """The consumer is a push consumer; fetch/next/consume need a pull consumer (409)."""


class PullWarning(PullError):
    """A pull was refused by a consumer limit (409 Exceeded MaxWaiting, MaxRequestBatch...); not terminal."""


class MissedHeartbeatError(JetStreamError):
    """No message, status or heartbeat arrived within twice the idle heartbeat."""


# JetStream API err_code -> class; codes from the server's errors.json.
_API_ERRORS: dict[int, type[APIError]] = {
    10039: JetStreamNotEnabledError,  # JetStream not enabled for account
    10076: JetStreamNotEnabledError,  # JetStream not enabled
    10059: StreamNotFoundError,
    10058: StreamNameInUseError,
    10014: ConsumerNotFoundError,
    10148: ConsumerExistsError,  # consumer already exists (create with a different config)
    10105: ConsumerExistsError,  # consumer name already in use
    10013: ConsumerExistsError,  # consumer name already in use (older servers)
    10037: MessageNotFoundError,
    10071: WrongLastSequenceError,
    10070: WrongLastMsgIdError,
}


def api_error(code: int, err_code: int, description: str) -> APIError:
    """Build the most specific APIError for a server error object."""
    cls = _API_ERRORS.get(err_code, APIError)
    return cls(code, err_code, description)
