"""The object store's wire format (ADR-20), in one place: subjects, name encoding, the digest, and the
metadata JSON every client reads and writes.

Written as nats.go writes it, so nats.go, nats.js, jnats and nats-py read what we store: names are encoded
with URL-safe base64 *with* padding (Go's ``base64.URLEncoding``), the digest is ``SHA-256=`` and the URL-safe
padded base64 of the data's SHA-256, headers are Go's ``http.Header`` (name -> list of values), and ``mtime``
is Go's zero time, because readers take the real one from the stream's timestamp (nats.go's ``publishMeta``).
Reading is lenient about what other clients write: nats-py stores ``mtime`` as an ISO time or ``""`` and
headers as plain strings; unknown keys are kept and written back.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from ... import errors
from ...models import parse_time
from ...models.object_store import ObjectInfo, ObjectLink

__all__ = [
    "DIGEST_PREFIX",
    "ROLLUP_HEADERS",
    "chunk_subject",
    "decode_info",
    "digest_of",
    "digest_matches",
    "encode_info",
    "encode_name",
    "go_json",
    "meta_subject",
]

DIGEST_PREFIX = "SHA-256="
#: a metadata write replaces every earlier one of the same object (the stream keeps only the newest)
ROLLUP_HEADERS = {"Nats-Rollup": "sub"}
_ZERO_TIME = "0001-01-01T00:00:00Z"


def encode_name(name: str) -> str:
    """An object name as a subject token: any name is allowed, so it is base64-encoded (URL-safe, padded)."""
    return base64.urlsafe_b64encode(name.encode("utf-8")).decode("ascii")


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{encode_name(name)}"


def chunk_subject(bucket: str, nuid: str) -> str:
    return f"$O.{bucket}.C.{nuid}"


def digest_of(sha256: bytes) -> str:
    return DIGEST_PREFIX + base64.urlsafe_b64encode(sha256).decode("ascii")


def digest_matches(recorded: str | None, sha256: bytes) -> bool:
    """Compare by decoded bytes, so a digest stored without padding (or with a lower-case prefix) still matches."""
    if not recorded:
        return False
    text = recorded[len(DIGEST_PREFIX) :] if recorded.upper().startswith(DIGEST_PREFIX) else recorded
    text = text.strip()
    try:
        stored = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return False
    return stored == sha256


def encode_info(info: ObjectInfo) -> bytes:
    """The metadata message of ``info`` (nats.go's field names and omitempty rules)."""
    out: dict[str, Any] = dict(info.extra)
    out["name"] = info.name
    for key in ("description", "headers", "metadata"):
        value = getattr(info, key)
        if value:
            out[key] = value
        else:
            out.pop(key, None)
    options: dict[str, Any] = {}
    if info.link is not None:
        link: dict[str, Any] = {"bucket": info.link.bucket}
        if info.link.name:
            link["name"] = info.link.name
        options["link"] = link
    if info.max_chunk_size:
        options["max_chunk_size"] = info.max_chunk_size
    if options:
        out["options"] = options
    else:
        out.pop("options", None)
    out["bucket"] = info.bucket
    out["nuid"] = info.nuid
    out["size"] = info.size
    out["mtime"] = _ZERO_TIME
    out["chunks"] = info.chunks
    if info.digest:
        out["digest"] = info.digest
    else:
        out.pop("digest", None)
    if info.deleted:
        out["deleted"] = True
    else:
        out.pop("deleted", None)
    return go_json(out)


# Go's encoding/json escapes these inside strings (HTML safety, and JavaScript's line separators); they can
# only occur inside strings, so replacing them in the output is exact.
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def go_json(value: Any) -> bytes:
    """``value`` as Go's ``json.Marshal`` writes it: compact, UTF-8 as is, ``<``, ``>``, ``&`` escaped. Any
    JSON reader takes Python's default form too; this makes our metadata byte-identical to nats.go's."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.translate(_GO_ESCAPES).encode("utf-8")


def decode_info(data: bytes, bucket: str, stored_at: datetime | None) -> ObjectInfo:
    """The ObjectInfo of a metadata message; ``stored_at`` (the message's timestamp) is its mtime.

    BadObjectMetaError when it is not the JSON object every client writes.
    """
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise errors.BadObjectMetaError(f"object metadata in bucket {bucket!r} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise errors.BadObjectMetaError(f"object metadata in bucket {bucket!r} is not a JSON object")
    extra = dict(raw)
    name = extra.pop("name", None)
    nuid = extra.pop("nuid", None)
    if not isinstance(name, str) or not name or not isinstance(nuid, str) or not nuid:
        raise errors.BadObjectMetaError(f"object metadata in bucket {bucket!r} lacks its name or nuid")
    options = extra.pop("options", None) or {}
    if not isinstance(options, dict):
        raise errors.BadObjectMetaError(f"object {name!r} in bucket {bucket!r}: 'options' is not an object")
    link = None
    raw_link = options.get("link")
    if isinstance(raw_link, dict) and raw_link.get("bucket"):
        link = ObjectLink(bucket=str(raw_link["bucket"]), name=raw_link.get("name") or None)
    mtime_text = extra.pop("mtime", None)
    mtime = stored_at
    if mtime is None and isinstance(mtime_text, str) and mtime_text:
        mtime = parse_time(mtime_text)
    try:
        return ObjectInfo(
            name=name,
            bucket=str(extra.pop("bucket", None) or bucket),
            nuid=nuid,
            size=int(extra.pop("size", 0) or 0),
            chunks=int(extra.pop("chunks", 0) or 0),
            mtime=mtime,
            digest=extra.pop("digest", None) or None,
            deleted=bool(extra.pop("deleted", False)),
            description=extra.pop("description", None) or None,
            headers=_headers(extra.pop("headers", None)),
            metadata=extra.pop("metadata", None) or None,
            link=link,
            max_chunk_size=options.get("max_chunk_size") or None,
            extra=extra,
        )
    except (TypeError, ValueError) as exc:
        raise errors.BadObjectMetaError(f"object {name!r} in bucket {bucket!r}: invalid metadata: {exc}") from exc


def _headers(raw: object) -> dict[str, list[str]] | None:
    """Go writes lists, nats-py whatever it was given (often plain strings): one shape either way."""
    if not isinstance(raw, dict) or not raw:
        return None
    out: dict[str, list[str]] = {}
    for key, value in raw.items():
        if isinstance(value, list):
            out[str(key)] = [str(v) for v in value]
        elif value is not None:
            out[str(key)] = [str(value)]
    return out or None
