"""Requests that go unanswered, as in a cluster election: repeated only where repeating is safe.

The fault proxy drops exactly one request (or one reply) on a connection that stays up, which is what a
client sees when the leader that should answer is lost. An idempotent API request and a publish with a msg_id
are sent again within their timeout; a delete and a publish without a msg_id are sent once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import tenacity

import jetstream_sync
from jetstream_sync import StorageType, StreamConfig, errors
from jetstream_sync.jetstream.retry import default_api_retry

TIMEOUT = 3.0  # an attempt gets a third of it (1 s): room for a second one


@pytest.fixture
def proxied(fault_proxy, nats_server_function):
    with jetstream_sync.connect(nats_server_function.url) as direct:
        direct.jetstream().create_stream(StreamConfig(name="R", subjects=["r.>"]))
    with jetstream_sync.connect(fault_proxy.url) as nc:
        yield fault_proxy, nc.jetstream(timeout=TIMEOUT)


def test_an_unanswered_stream_info_is_asked_again(proxied):
    proxy, js = proxied
    sent = proxy.watch("upstream", "$JS.API.STREAM.INFO.R")
    dropped = proxy.drop_next("upstream", "$JS.API.STREAM.INFO.R")
    assert js.stream_info("R").config.name == "R"
    assert dropped.wait(timeout=1)
    assert len(sent.frames) == 1  # the second attempt, the one that went through


def test_a_lost_create_reply_is_answered_by_asking_again(proxied):
    proxy, js = proxied
    dropped = proxy.drop_next(
        "downstream", lambda f: f.is_message and b'"type":"io.nats.jetstream.api.v1.stream_create_response"' in f.data
    )
    stream = js.create_stream(StreamConfig(name="MADE", subjects=["made.>"]))
    assert dropped.wait(timeout=1)
    assert stream.info().config.name == "MADE"


def test_identical_creates_in_flight_together_all_get_the_one_stream(nats_server_function):
    """What a create repeated after a timeout meets while its first attempt is still being made (a slow disk): the
    server makes creates of one name one at a time and answers the later ones with the stream the first made; none
    races it into 500 "error creating store for stream" (see jetstream/retry.py)."""
    creates = 8
    config = StreamConfig(name="TWICE", subjects=["twice.>"], storage=StorageType.FILE)
    together = threading.Barrier(creates)
    with jetstream_sync.connect(nats_server_function.url) as nc:
        js = nc.jetstream(timeout=20)

        def create() -> dict:
            together.wait(timeout=10)
            return js.api.request("STREAM.CREATE.TWICE", config.to_json(), idempotent=False)

        with ThreadPoolExecutor(creates) as pool:
            replies = [future.result(timeout=30) for future in [pool.submit(create) for _ in range(creates)]]
        made = js.api.request("STREAM.INFO.TWICE")["created"]
    assert [reply["created"] for reply in replies] == [made] * creates  # every one answered with the one stream


def test_a_delete_is_not_sent_twice(proxied):
    proxy, js = proxied
    sent = proxy.watch("upstream", "$JS.API.STREAM.DELETE.R")
    proxy.drop_next("upstream", "$JS.API.STREAM.DELETE.R")
    with pytest.raises(errors.TimeoutError):
        js.delete_stream("R")
    assert sent.frames == []  # dropped once, never repeated


def test_a_policy_that_does_not_retry_gives_the_timeout(fault_proxy, nats_server_function):
    with jetstream_sync.connect(nats_server_function.url) as direct:
        direct.jetstream().create_stream(StreamConfig(name="R", subjects=["r.>"]))
    once = tenacity.Retrying(stop=tenacity.stop_after_attempt(1), reraise=True)
    with jetstream_sync.connect(fault_proxy.url) as nc:
        js = nc.jetstream(timeout=TIMEOUT, api_retry=once)
        fault_proxy.drop_next("upstream", "$JS.API.STREAM.INFO.R")
        with pytest.raises(errors.TimeoutError):
            js.stream_info("R")
        assert js.stream_info("R").config.name == "R"


def test_a_publish_with_a_msg_id_is_sent_again_and_stored_once(proxied):
    proxy, js = proxied
    dropped = proxy.drop_next("downstream", lambda f: f.is_message and b'"stream":"R"' in f.data)
    ack = js.publish("r.a", b"1", msg_id="one")
    assert dropped.wait(timeout=1)
    assert (ack.seq, ack.duplicate) == (1, True)  # the first attempt was stored; its ack was lost
    assert js.stream_info("R").state.messages == 1


def test_a_publish_without_a_msg_id_is_sent_once(proxied):
    proxy, js = proxied
    sent = proxy.watch("upstream", "r.a")
    proxy.drop_next("downstream", lambda f: f.is_message and b'"stream":"R"' in f.data)
    with pytest.raises(errors.TimeoutError):
        js.publish("r.a", b"1", timeout=1.5)
    assert len(sent.frames) == 1
    assert js.stream_info("R").state.messages == 1


def test_api_retry_must_be_a_tenacity_policy(nats_server):
    with jetstream_sync.connect(nats_server.url) as nc, pytest.raises(errors.InvalidTypeError, match="api_retry"):
        nc.jetstream(api_retry=default_api_retry)  # the factory, not a policy
