"""Fixtures of the key-value server tests."""

from __future__ import annotations

import pytest

from tests.server.jetstream.kv.kvhelpers import bucket


@pytest.fixture
def kv(js, name):
    """A fresh bucket named after the test, keeping 10 values per key."""
    return bucket(js, name, history=10)
