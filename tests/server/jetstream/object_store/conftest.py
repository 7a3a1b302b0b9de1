"""Fixtures of the object store server tests."""

from __future__ import annotations

import pytest

from jetstream_sync import ObjectStore, ObjectStoreConfig


@pytest.fixture
def obs(js, name) -> ObjectStore:
    """A fresh bucket named after the test."""
    return js.create_object_store(ObjectStoreConfig(bucket=name))
