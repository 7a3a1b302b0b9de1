"""Errors of typed payloads (`jetstream_sync.codecs`), part of [`jetstream_sync.errors`][jetstream_sync.errors].

They live here only so that errors.py stays under 700 lines: errors.py imports them all (and lists them in its
``__all__``), so ``errors.PayloadDecodeError`` is the name to use; each class reports that module as its own.
"""

from __future__ import annotations

from .errors import InvalidArgumentError, JetStreamError

__all__ = ["CodecError", "CodecExtraMissingError", "KeyCodecError", "PayloadDecodeError", "PayloadEncodeError"]


class CodecError(JetStreamError):
    """Base of the errors a codec's work raises: one ``except`` for every typed-payload failure."""


class PayloadDecodeError(CodecError, ValueError):
    """A received payload is not what the codec reads (bad JSON, a msgspec or pydantic validation error, a
    value written by someone else). Raised where the payload is read (``msg.value``, ``entry.value``), so in a
    handler the message is still yours: ``msg.nak()`` to retry it, ``msg.term()`` to drop it for good.

    ``message`` is the `Msg` (or KV entry) whose payload failed, ``codec`` the codec that failed; the codec's
    own exception is ``__cause__``."""

    def __init__(self, message: object, codec: object, cause: BaseException) -> None:
        self.message = message
        self.codec = codec
        where = getattr(message, "subject", None) or getattr(message, "raw_key", None)  # a Msg, a CodecEntry
        advice = (
            " (nak() it to retry, term() it to drop it; a consume() handler that lets this escape has it terminated)"
            if hasattr(message, "nak")
            else ""
        )
        super().__init__(
            f"{type(codec).__name__} could not decode the payload of {where!r}: {type(cause).__name__}: {cause}{advice}"
        )


class PayloadEncodeError(CodecError, InvalidArgumentError):
    """An object the codec cannot encode (a type JSON does not know, a model of another class). Raised before
    anything is sent; ``value`` is the object, ``codec`` the codec, the codec's exception is ``__cause__``."""

    def __init__(self, value: object, codec: object, cause: BaseException) -> None:
        self.value = value
        self.codec = codec
        super().__init__(
            "data", f"{type(codec).__name__} could not encode a {type(value).__name__}: {type(cause).__name__}: {cause}"
        )


class KeyCodecError(CodecError, InvalidArgumentError):
    """A KV key codec could not encode or decode a key (a stored key that is not base64, a character the
    nats.js flavour cannot carry), or a filter with wildcards met a key codec that cannot keep them
    (ADR-54's filterable key codecs)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__("key", f"{key!r}: {message}")


class CodecExtraMissingError(CodecError, ImportError):
    """A codec needs a package that is not installed; the message names the extra that brings it
    (``pip install 'jetstream-sync[msgspec]'``). Raised when the codec is made, not when the library is
    imported: the extras are imported only by the codecs that use them."""

    def __init__(self, codec: str, module: str, extra: str) -> None:
        self.extra = extra
        super().__init__(f"{codec} needs the {module!r} package: pip install 'jetstream-sync[{extra}]'", name=module)
