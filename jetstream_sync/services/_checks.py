"""What ADR-32 fixes about names, versions, subjects and metadata, checked before anything is sent.

Every check raises InvalidArgumentError or InvalidTypeError naming the argument, so a bad service definition
fails where it is written (at import, for a decorator), not when it starts on a connection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from .. import errors
from .._validate import MAX_SUBJECT_BYTES, check_int, check_queue, check_subject

__all__ = [
    "API_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "check_group",
    "check_limit",
    "check_metadata",
    "check_service_name",
    "check_version",
    "endpoint_subject",
    "queue_group_of",
]

#: the root of the discovery subjects: ``$SRV.PING|INFO|STATS[.<name>[.<id>]]``
API_PREFIX = "$SRV"
#: every endpoint's queue group unless the service, a group or the endpoint names another (or none)
DEFAULT_QUEUE_GROUP = "q"
#: the header carrying an error reply's description (ADR-32)
ERROR_HEADER = "Nats-Service-Error"
#: the header carrying an error reply's code, a number (ADR-32)
ERROR_CODE_HEADER = "Nats-Service-Error-Code"

# ADR-32: names are A-Z, a-z, 0-9, dash and underscore; versions are SemVer 2.0 (the regular expression semver.org
# suggests, which every other client uses too).
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


def check_service_name(field: str, value: object) -> str:
    """A service or endpoint name: letters, digits, ``-`` and ``_`` (it becomes a subject token)."""
    if not isinstance(value, str):
        raise errors.InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    if not _NAME.fullmatch(value):
        raise errors.InvalidArgumentError(
            field, f"{value!r} must be non-empty and hold only letters, digits, '-' and '_' (ADR-32)"
        )
    if len(value) > 256:
        raise errors.InvalidArgumentError(field, f"{value[:32]!r}... is {len(value)} characters; at most 256")
    return value


def check_version(value: object) -> str:
    """A semantic version (``1.0.0``, ``2.1.3-rc.1+build.5``)."""
    if not isinstance(value, str):
        raise errors.InvalidTypeError("version", f"must be a str, got {type(value).__name__}")
    if not _SEMVER.fullmatch(value):
        raise errors.InvalidArgumentError(
            "version", f"{value!r} is not a semantic version (MAJOR.MINOR.PATCH, e.g. '1.0.0' or '2.1.0-rc.1')"
        )
    return value


def check_metadata(field: str, value: object) -> Mapping[str, str]:
    """Metadata: a mapping of non-empty str keys to str values, copied and frozen (ADR-32: immutable once set)."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise errors.InvalidTypeError(field, f"must be a dict of str to str, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise errors.InvalidTypeError(field, f"must be a dict of str to str; {key!r}: {item!r} is not")
        if not key:
            raise errors.InvalidArgumentError(field, "keys must not be empty")
    return MappingProxyType(dict(value))


def check_group(value: object) -> str:
    """A group's prefix: subject tokens (``*`` allowed, ``>`` not: more tokens follow it)."""
    if not isinstance(value, str):
        raise errors.InvalidTypeError("name", f"must be a str, got {type(value).__name__}")
    check_subject("name", value, wildcards=True)
    if ">" in value.split("."):
        raise errors.InvalidArgumentError("name", f"{value!r}: a group is a prefix, so it cannot hold '>'")
    return value


def endpoint_subject(prefix: str, subject: str) -> str:
    """The subject an endpoint listens on: ``subject`` (wildcards allowed) under the group ``prefix``. Refuses
    ``$SRV``, which belongs to the discovery requests."""
    check_subject("subject", subject, wildcards=True)
    full = f"{prefix}.{subject}" if prefix else subject
    if len(full.encode()) > MAX_SUBJECT_BYTES:
        check_subject("subject", full, wildcards=True)  # raises, saying how long it is
    if full.split(".", 1)[0] == API_PREFIX:
        raise errors.InvalidArgumentError("subject", f"{full!r}: {API_PREFIX} is reserved for service discovery")
    return full


def queue_group_of(value: object, inherited: str) -> str:
    """The queue group an endpoint or group uses: None inherits ``inherited``, "" means none (every instance
    gets every request), anything else names one."""
    if value is None:
        return inherited
    if value == "":
        return ""
    return check_queue("queue_group", value)


def check_limit(field: str, value: object, default: int) -> int:
    """A count of at least 1, or None for ``default``."""
    if value is None:
        return default
    return check_int(field, value, minimum=1)
