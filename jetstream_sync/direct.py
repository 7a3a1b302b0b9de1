"""Batched direct get (ADR-31): the public home of what lives in :mod:`jetstream_sync.jetstream.direct`."""

from __future__ import annotations

from .jetstream.direct import DirectBatch, RawStoredMsg, direct_get_batch, direct_get_batch_raw

__all__ = ["DirectBatch", "RawStoredMsg", "direct_get_batch", "direct_get_batch_raw"]
