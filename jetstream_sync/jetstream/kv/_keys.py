"""Keys and the headers of a bucket's messages: what is a valid key, and what operation an entry records (and
how long purge_deletes keeps a marker by default).

Keys follow every other client's rules (nats.go ``validKeyRe``): letters, digits and ``-/_=.``, no empty token,
no leading or trailing ``.``; a watch or keys filter may also use ``*`` as a whole token and ``>`` as the last.
Checking here means a bad key fails with InvalidKeyError before anything is sent, instead of a publish to a
subject the bucket does not capture.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from ... import errors
from ...headers import parse_header_block
from ...models.kv import KeyValueOp

__all__ = [
    "DEFAULT_PURGE_DELETES_OLDER_THAN",
    "OPERATION_HEADER",
    "check_filter",
    "check_key",
    "operation_of",
    "operation_of_raw",
]

_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-/_=.")

#: purge_deletes keeps markers younger than this by default (as nats.go), so watchers still see them
DEFAULT_PURGE_DELETES_OLDER_THAN = 30 * 60.0

#: the header every client writes on a delete or purge marker
OPERATION_HEADER = "KV-Operation"
# nats-server 2.11+ writes a marker with this header (and no KV-Operation) when a value ends by a TTL or a limit.
_MARKER_REASON = "Nats-Marker-Reason"
_MARKER_OPERATIONS = {"MaxAge": KeyValueOp.PURGE, "Purge": KeyValueOp.PURGE, "Remove": KeyValueOp.DELETE}


@lru_cache(maxsize=8192)
def _key_problem(key: str, wildcards: bool) -> str | None:
    if not key:
        return "must not be empty"
    if key[0] == "." or key[-1] == ".":
        return f"{key!r} starts or ends with '.'"
    tokens = key.split(".")
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        if not token:
            return f"{key!r} has an empty token ('..')"
        if wildcards and token == "*":
            continue
        if wildcards and token == ">":
            if i != last:
                return f"{key!r}: '>' must be the last token"
            continue
        bad = sorted(set(token) - _KEY_CHARS)
        if bad:
            shown = ", ".join(repr(c) for c in bad)
            allowed = "letters, digits and '-/_=.'" + (" ('*' and '>' as whole tokens)" if wildcards else "")
            return f"{key!r} contains {shown}; keys may hold only {allowed}"
    return None


def check_key(key: object, field: str = "key") -> str:
    """A key to read or write: no wildcards."""
    return _checked(key, field, wildcards=False)


def check_filter(key: object, field: str = "keys") -> str:
    """A key filter for watch and keys: ``*`` and ``>`` allowed as tokens."""
    return _checked(key, field, wildcards=True)


def _checked(key: object, field: str, *, wildcards: bool) -> str:
    if not isinstance(key, str):
        raise errors.InvalidTypeError(field, f"must be a str, got {type(key).__name__}")
    problem = _key_problem(key, wildcards)
    if problem is not None:
        raise errors.InvalidKeyError(field, problem)
    return key


def operation_of(headers: Mapping[str, str] | None) -> KeyValueOp:
    """The operation an entry records: its KV-Operation header, else a server limit marker's reason."""
    if not headers:
        return KeyValueOp.PUT
    value = headers.get(OPERATION_HEADER)
    if value is not None:
        try:
            return KeyValueOp(value)
        except ValueError:
            return KeyValueOp.PUT  # an unknown operation is a value, as the other clients read it
    reason = headers.get(_MARKER_REASON)
    if reason is not None:
        return _MARKER_OPERATIONS.get(reason, KeyValueOp.PURGE)
    return KeyValueOp.PUT


def operation_of_raw(raw: bytes | None) -> KeyValueOp:
    """`operation_of` from a raw header block; values (most entries) are told apart without parsing."""
    if raw is None or (b"KV-Operation" not in raw and b"Nats-Marker-Reason" not in raw):
        return KeyValueOp.PUT
    return operation_of(parse_header_block(raw)[2])
