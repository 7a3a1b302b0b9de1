"""What a handler gets ([`Request`][jetstream_sync.services.Request]) and what it may return (bytes, str, a dict or list
as JSON, None, or a [`Response`][jetstream_sync.services.Response] with headers), and how that becomes the reply."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Union

import attrs

from .. import errors
from .._protocol import Command, encode_pub_parts
from ..headers import Headers, HeadersInput, encode_headers, parse_header_block
from ._errors import ServiceError

__all__ = ["Handler", "Reply", "Request", "Response", "encode_reply"]


@attrs.frozen
class Response:
    """A reply with headers: ``return Response(b"...", {"Content-Type": "text/csv"})``. ``data`` may be bytes, a
    str (sent as UTF-8) or a dict or list (sent as JSON), as a handler's plain return value may."""

    data: bytes | bytearray | memoryview | str | dict[str, Any] | list[Any] | None = b""
    headers: HeadersInput | None = None


#: what a handler may return: the reply's body (bytes as they are, str as UTF-8, dict or list as JSON, None for
#: an empty reply) or a `Response` with headers
Reply = Union[bytes, bytearray, memoryview, str, dict[str, Any], list[Any], None, Response]  # noqa: UP007 - an alias


class Request:
    """A request to an endpoint, as its handler gets it (on one of the service's worker threads).

    ``data`` is the body, ``subject`` the subject it came on (useful with wildcard endpoints), ``endpoint`` the
    endpoint's name, ``headers`` the request's headers (empty when it had none), ``reply`` its reply subject
    ("" for a publish that expects no answer: the handler runs and nothing is sent).
    """

    __slots__ = ("_headers", "_raw_headers", "data", "endpoint", "reply", "subject")

    def __init__(self, endpoint: str, subject: str, reply: str, data: bytes, raw_headers: bytes | None) -> None:
        self.endpoint = endpoint
        self.subject = subject
        self.reply = reply
        self.data = data
        self._raw_headers = raw_headers
        self._headers: Headers | None = None

    def __repr__(self) -> str:
        return f"Request(endpoint={self.endpoint!r}, subject={self.subject!r}, {len(self.data)} bytes)"

    @property
    def headers(self) -> Headers:
        """The request's headers (parsed on first use)."""
        if self._headers is None:
            self._headers = Headers() if not self._raw_headers else parse_header_block(self._raw_headers)[2]
        return self._headers

    def text(self) -> str:
        """The body decoded as UTF-8; a body that is not UTF-8 raises ServiceError 400."""
        try:
            return self.data.decode()
        except UnicodeDecodeError as exc:
            raise ServiceError(400, f"the request body is not UTF-8 text ({exc.reason})") from None

    def json(self) -> Any:
        """The body parsed as JSON; a body that is not JSON raises ServiceError 400 (the caller gets that reply)."""
        try:
            return json.loads(self.data)
        except ValueError as exc:
            raise ServiceError(400, f"the request body is not JSON ({exc})") from None


#: an endpoint's handler: a plain function of the request; what it returns is the reply
Handler = Callable[[Request], Reply]


def _body(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if value is None:
        return b""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":")).encode()
    raise errors.InvalidTypeError(
        "reply",
        f"a handler returned {type(value).__name__}; return bytes, str, a dict or list (JSON), None or a Response",
    )


def encode_reply(reply: bytes, value: object, max_payload: int, extra_headers: HeadersInput | None = None) -> Command:
    """The PUB (or HPUB) answering ``reply`` with a handler's return value (or an error's headers); raises
    InvalidTypeError for a value that is not a reply, MaxPayloadError for one larger than the server takes.

    ``reply`` came from the server's MSG line, so it is a valid subject already: it is not checked again.
    """
    headers: HeadersInput | None = extra_headers
    if isinstance(value, Response):
        headers = value.headers if extra_headers is None else {**dict(value.headers or {}), **dict(extra_headers)}
        value = value.data
    payload = _body(value)
    block = encode_headers(headers) if headers else None
    size = len(payload) + (len(block) if block else 0)
    if size > max_payload:
        raise errors.MaxPayloadError(
            "reply", f"the reply of {size} bytes exceeds the server's max_payload of {max_payload} bytes"
        )
    return encode_pub_parts(reply, b"", block, payload)
