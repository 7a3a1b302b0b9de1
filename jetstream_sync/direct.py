"""Batched direct get (ADR-31): the public home of what lives in `jetstream_sync.jetstream.direct`."""

from __future__ import annotations

from .jetstream.direct import (
    MULTI_LAST_LIMIT,
    DirectBatch,
    RawStoredMsg,
    direct_get_batch,
    direct_get_batch_raw,
    direct_get_last,
    direct_get_last_raw,
)

__all__ = [
    "MULTI_LAST_LIMIT",
    "DirectBatch",
    "RawStoredMsg",
    "direct_get_batch",
    "direct_get_batch_raw",
    "direct_get_last",
    "direct_get_last_raw",
]
