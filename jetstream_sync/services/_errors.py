"""ServiceError: the error a handler raises on purpose, and the one a caller gets from an error reply."""

from __future__ import annotations

from typing import Any

from .. import errors
from ..headers import Headers
from ._checks import ERROR_CODE_HEADER, ERROR_HEADER

__all__ = ["ServiceError"]

# An error description travels as one header value: it is kept to one line and to this many characters.
_MAX_DESCRIPTION = 1024


def _one_line(text: str) -> str:
    """``text`` as a header value: CR and LF become spaces, lone surrogates are replaced, long text is cut."""
    line = " ".join(text.splitlines()).strip()
    line = line.encode("utf-8", "replace").decode("utf-8")
    return line if len(line) <= _MAX_DESCRIPTION else line[: _MAX_DESCRIPTION - 3] + "..."


class ServiceError(errors.JetStreamError):
    """An error reply: ``code`` (a number, as ADR-32 asks: HTTP-like codes are the custom) and ``description``.

    In a handler, ``raise ServiceError(404, "no such order")`` answers the request with the headers
    ``Nats-Service-Error-Code: 404`` and ``Nats-Service-Error: no such order`` (and ``data`` as the body, empty
    by default); the endpoint's stats count an error. It is deliberate, so it is not logged. Anything else a
    handler raises answers ``500`` with the exception's class name, and is logged with its traceback.

    [`ServiceClient.request`][jetstream_sync.services.ServiceClient.request] raises it when a reply carries those
    headers, whoever the service is (ours, nats.go's, nats.js's or nats-py's micro). The description is one line of at
    most 1,024 characters (CR and LF become spaces): it travels as a header value.
    """

    def __init__(self, code: int, description: str, data: bytes = b"") -> None:
        if isinstance(code, bool) or not isinstance(code, int):
            raise errors.InvalidTypeError("code", f"must be an int, got {type(code).__name__}")
        if not isinstance(description, str):
            raise errors.InvalidTypeError("description", f"must be a str, got {type(description).__name__}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise errors.InvalidTypeError("data", f"must be bytes, got {type(data).__name__}")
        self.code = code
        self.description = _one_line(description)
        self.data = bytes(data)
        super().__init__(f"{code}: {self.description}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.description, self.data))

    @property
    def headers(self) -> dict[str, str]:
        """The two ADR-32 headers of this error's reply."""
        return {ERROR_HEADER: self.description, ERROR_CODE_HEADER: str(self.code)}

    @classmethod
    def from_reply(cls, headers: Headers, data: bytes = b"") -> ServiceError | None:
        """The error a reply's headers carry, or None when it is not an error reply.

        A code that is not a number (a service that does not follow ADR-32) becomes 500, with the code text kept
        in the description.
        """
        code_text = headers.get(ERROR_CODE_HEADER)
        description = headers.get(ERROR_HEADER)
        if code_text is None and description is None:
            return None
        try:
            code = int((code_text or "").strip())
        except ValueError:
            code = 500
            description = f"{description or ''} (code {code_text!r})".strip()
        return cls(code, description or "", data)
