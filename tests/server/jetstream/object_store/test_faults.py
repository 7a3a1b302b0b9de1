"""Lost frames in the middle of a put, through the loopback FaultProxy: a put never purges chunks that stored
metadata names, and never leaves the chunks of a put whose metadata was not stored."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import ObjectStoreConfig, errors

from .obshelpers import chunk_messages, chunks_on


def _pub_ack_of(stream: str):
    """A predicate for the downstream frame carrying a publish acknowledgement from ``stream``."""
    marker = b'"stream":"%s"' % stream.encode()
    return lambda frame: frame.verb in ("MSG", "HMSG") and marker in frame.data


def test_a_lost_ack_of_stored_metadata_is_a_successful_put(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url, timeout=1) as nc:
        js = nc.jetstream(timeout=1)
        obs = js.create_object_store(ObjectStoreConfig(bucket="lostack"))
        old = obs.put("doc", b"old" * 100_000)  # 3 chunks
        # The new version is one chunk: its ack is the 1st from the stream, the metadata's the 2nd.
        dropped = fault_proxy.drop_next("downstream", _pub_ack_of("OBJ_lostack"), skip=1)
        info = obs.put("doc", b"new version")
        assert dropped.wait(timeout=5)
        assert obs.get_bytes("doc") == b"new version" and obs.info("doc").nuid == info.nuid
        assert chunks_on(js, obs, old.nuid) == []  # it went on to purge the version it replaced
        assert chunk_messages(js, obs) == 1


def test_metadata_that_never_reached_the_server_fails_the_put_and_purges_its_chunks(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url, timeout=1) as nc:
        js = nc.jetstream(timeout=1)
        obs = js.create_object_store(ObjectStoreConfig(bucket="lostmeta"))
        obs.put("doc", b"old")
        meta_subject = "$O.lostmeta.M.>"
        dropped = fault_proxy.drop_next("upstream", meta_subject)
        with pytest.raises(errors.TimeoutError):
            obs.put("doc", b"new" * 100_000)
        assert dropped.wait(timeout=5)
        assert obs.get_bytes("doc") == b"old"
        assert chunk_messages(js, obs) == 1  # the failed put's three chunks were purged
