"""Fixtures of the key-value server tests."""

from __future__ import annotations

import pytest

from tests.server.jetstream.kv.kvhelpers import bucket


@pytest.fixture
def kv(js, name):
    """A fresh bucket named after the test, keeping 10 values per key."""
    return bucket(js, name, history=10)


@pytest.fixture
def small_pulls(monkeypatch):
    """Headers-only walks (keys, purge_deletes) pull 50 messages at a time instead of 10,000, so most of a
    bucket is still on the server after the first batch and the walk's consumer is still there to look at."""
    from jetstream_sync.jetstream.kv import bucket as bucket_module

    monkeypatch.setattr(bucket_module, "_HEADERS_ONLY_WINDOW", 50)
