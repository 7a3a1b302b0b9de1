"""NATS message headers: multi-valued, order-preserving, parsed from and encoded to the wire block."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Union

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Headers", "HeadersInput", "encode_headers", "parse_header_block"]

_HEADER_LINE = b"NATS/1.0"
_CRLF = b"\r\n"


class Headers(Mapping[str, str]):
    """Multi-valued headers. ``h[key]`` gives the first value, ``get_list(key)`` all of them.

    Modelled on httpx.Headers: the mapping face keeps everyday code simple, while nothing the server sent
    (repeated keys) is lost.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, list[str]] | None = None) -> None:
        self._items: dict[str, list[str]] = dict(items) if items else {}

    def __getitem__(self, key: str) -> str:
        return self._items[key][0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get_list(self, key: str) -> list[str]:
        """Every value of ``key`` in arrival order; empty when absent."""
        return list(self._items.get(key, ()))

    def multi_items(self) -> list[tuple[str, str]]:
        """Every (name, value) pair, a name once per value, in the order they were added."""
        return [(k, v) for k, values in self._items.items() for v in values]

    def to_dict(self) -> dict[str, list[str]]:
        """A plain dict of each name to its list of values (a copy)."""
        return {k: list(v) for k, v in self._items.items()}

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._items == other._items
        if isinstance(other, Mapping):  # a plain dict compares by all values: {"k": ["a", "b"]} or {"k": "a"}
            return self._items == {k: v if isinstance(v, list) else [v] for k, v in other.items()}
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


HeadersInput = Union[Headers, Mapping[str, Union[str, Sequence[str]]]]  # noqa: UP007 - a runtime alias


def parse_header_block(raw: bytes) -> tuple[int | None, str, Headers]:
    """Split ``NATS/1.0[ status[ description]]\\r\\nKey: value\\r\\n...\\r\\n\\r\\n`` into its parts.

    Lines without a colon are skipped rather than failing: a newer server's extension must not break reads.
    """
    lines = raw.splitlines() or [b""]
    first = lines[0]
    status: int | None = None
    description = ""
    if first.startswith(_HEADER_LINE):
        rest = first[len(_HEADER_LINE) :].strip()
        if rest:
            code, _, desc = rest.partition(b" ")
            if code.isdigit():
                status = int(code)
                description = desc.decode("utf-8", "replace").strip()
    items: dict[str, list[str]] = {}
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(b":")
        if not sep:
            continue
        name = key.decode("utf-8", "replace").strip()
        if not name:
            continue
        items.setdefault(name, []).append(value.decode("utf-8", "replace").strip())
    return status, description, Headers(items)


def _check_key(key: object) -> bytes:
    if not isinstance(key, str):
        raise InvalidTypeError("headers", f"keys must be str, got {type(key).__name__}")
    # header keys are ASCII tokens: anything else is refused, not replaced (that would merge distinct keys)
    encoded = key.encode("ascii") if key.isascii() else b""
    if not encoded or any(c <= 32 or c >= 127 or c == 58 for c in encoded):
        raise InvalidArgumentError("headers", f"key {key!r} must be non-empty printable ASCII without spaces or ':'")
    return encoded


def _check_value(key: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise InvalidTypeError("headers", f"value of {key!r} must be str, got {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise InvalidArgumentError("headers", f"value of {key!r} must not contain CR or LF")
    try:
        return value.encode()
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError("headers", f"value of {key!r} is not valid Unicode text ({exc.reason})") from None


def _values(key: str, value: object) -> Iterable[object]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return value
    raise InvalidTypeError("headers", f"value of {key!r} must be str or a list of str, got {type(value).__name__}")


def encode_headers(headers: HeadersInput | None, extra: Iterable[tuple[bytes, bytes]] = ()) -> bytes | None:
    """The wire header block, or None when there is nothing to send. Validates every key and value."""
    parts: list[bytes] = []
    if headers is not None:
        if isinstance(headers, Headers):
            pairs: Iterable[tuple[str, object]] = headers.multi_items()
        elif isinstance(headers, Mapping):
            pairs = ((k, v) for k, vs in headers.items() for v in _values(k, vs))
        else:
            raise InvalidTypeError("headers", f"must be a mapping of str to str, got {type(headers).__name__}")
        for key, value in pairs:
            parts.append(_check_key(key) + b": " + _check_value(key, value))
    for key_b, value_b in extra:
        parts.append(key_b + b": " + value_b)
    if not parts:
        return None
    return _HEADER_LINE + _CRLF + _CRLF.join(parts) + _CRLF + _CRLF
