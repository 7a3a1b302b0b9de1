"""JetStream publishing: acks, dedup, expectations, async pipelines, back-pressure and failures."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest
import tenacity

import jetstream_sync
from jetstream_sync import PubAck, StorageType, StreamConfig, errors
from tests.helpers import wait_until


def test_publish_returns_pub_ack_and_detects_duplicates(js, stream):
    ack = js.publish(f"{stream.name}.new", b"hello", msg_id="order-1")
    assert ack == PubAck(stream=stream.name, seq=1, duplicate=False, domain=None)
    again = js.publish(f"{stream.name}.new", b"hello again", msg_id="order-1")
    assert again.duplicate is True and again.seq == 1
    assert stream.info().state.messages == 1


def test_expected_last_sequence_and_friends(js, stream):
    s = stream.name
    js.publish(f"{s}.a", b"1", msg_id="m1")
    assert js.publish(f"{s}.a", b"2", expected_last_sequence=1).seq == 2
    with pytest.raises(errors.WrongLastSequenceError):
        js.publish(f"{s}.a", b"3", expected_last_sequence=1)
    with pytest.raises(errors.APIError, match="wrong last sequence"):
        js.publish(f"{s}.b", b"3", expected_last_subject_sequence=1)
    assert js.publish(f"{s}.b", b"3", expected_last_subject_sequence=0).seq == 3
    with pytest.raises(errors.APIError, match="expected stream does not match"):
        js.publish(f"{s}.a", b"4", expected_stream="OTHER")
    assert js.publish(f"{s}.a", b"4", expected_stream=s).seq == 4
    with pytest.raises(errors.WrongLastMsgIdError):
        js.publish(f"{s}.a", b"5", expected_last_msg_id="nope")


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"msg_id": ""}, ValueError),
        ({"msg_id": 5}, TypeError),
        ({"msg_id": "a\r\nb"}, ValueError),
        ({"expected_last_sequence": -1}, ValueError),
        ({"expected_last_sequence": "1"}, TypeError),
        ({"timeout": 0}, ValueError),
    ],
)
def test_bad_publish_arguments(js, stream, kwargs, exc):
    with pytest.raises(exc):
        js.publish(f"{stream.name}.a", b"", **kwargs)
    with pytest.raises(exc):
        js.publish_async(f"{stream.name}.a", b"", **kwargs)
    assert js.publish_async_pending() == 0
    assert js.publish(f"{stream.name}.a", b"ok").seq == 1


def test_publish_to_uncaptured_subject_fails_clearly(js):
    started = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError, match="no stream captures"):
        js.publish("nothing.captures.this", b"x")
    assert time.monotonic() - started < 5
    future = js.publish_async("nothing.captures.this", b"x")
    with pytest.raises(errors.NoRespondersError):
        future.result(timeout=5)


def test_publish_retry_policy_is_replaceable(client, stream):
    attempts = []
    retry = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(errors.NoRespondersError),
        stop=tenacity.stop_after_attempt(2),
        before=lambda state: attempts.append(state.attempt_number),
        reraise=True,
    )
    js = client.jetstream(publish_retry=retry)
    with pytest.raises(errors.NoStreamResponseError):
        js.publish("nothing.here", b"")
    assert attempts == [1, 2]
    with pytest.raises(TypeError):
        client.jetstream(publish_retry="always")


def test_one_timeout_bounds_a_publish_with_all_its_retries(client):
    """A policy of 20 tries 0.3 s apart (6 s) inside publish(timeout=1): the retrying stops within the second."""
    attempts = []
    retry = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(errors.NoRespondersError),
        stop=tenacity.stop_after_attempt(20),
        wait=tenacity.wait_fixed(0.3),
        before=lambda state: attempts.append(state.attempt_number),
        reraise=True,
    )
    js = client.jetstream(publish_retry=retry)
    started = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError):
        js.publish("nothing.here", b"", timeout=1)
    took = time.monotonic() - started
    assert took < 1.5, f"publish(timeout=1) took {took:.1f}s"
    assert 2 <= len(attempts) <= 4  # retried, and stopped before a pause would pass the deadline


def test_a_publish_that_timed_out_after_retries_names_the_time_the_caller_waited(fault_proxy):
    """A publish with a msg_id is sent again after a timed-out attempt, each attempt with a share of the timeout;
    the error named the last share ("within 1s") instead of the 3 s the caller gave it."""
    with jetstream_sync.connect(fault_proxy.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="SILENT", subjects=["silent.>"]))
        fault_proxy.stall("downstream")  # the server gets the publishes; its acks never come back
        with pytest.raises(errors.TimeoutError, match=r"within 3s \(3 attempts, each timed out\)"):
            js.publish("silent.a", b"x", msg_id="m1", timeout=3)
        with pytest.raises(errors.TimeoutError, match=r"within 2s"):  # one attempt: its own time is the caller's
            js.publish("silent.a", b"x", timeout=2)
        fault_proxy.resume("downstream")


def test_publish_async_pipeline(js, stream):
    futures = [js.publish_async(f"{stream.name}.a", b"%d" % i, msg_id=f"id-{i}") for i in range(5000)]
    js.publish_async_complete(timeout=20)
    assert js.publish_async_pending() == 0
    seqs = [f.result(timeout=0).seq for f in futures]
    assert sorted(seqs) == list(range(1, 5001))
    assert stream.info().state.messages == 5000


def test_publish_async_back_pressure_caps_in_flight(client, stream):
    js = client.jetstream()
    js_small = jetstream_sync.JetStream(client, max_pending=8, stall_timeout=5)
    peak = 0
    futures = []
    for i in range(500):
        futures.append(js_small.publish_async(f"{stream.name}.a", b"%d" % i))
        peak = max(peak, js_small.publish_async_pending())
    js_small.publish_async_complete(timeout=10)
    assert peak <= 8
    assert all(f.result(0).seq for f in futures)
    assert js.stream(stream.name).info().state.messages == 500


def test_sixteen_threads_share_one_client(js, name):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY))
    acks: list[PubAck] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            mine = [js.publish(f"{name}.{t}", b"sync-%d" % i) for i in range(1000)]
            futures = [js.publish_async(f"{name}.{t}", b"async-%d" % i) for i in range(1000)]
            mine += [f.result(timeout=30) for f in futures]
            with lock:
                acks.extend(mine)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures[:3]
    assert len(acks) == 32_000
    assert len({a.seq for a in acks}) == 32_000
    assert stream.info().state.messages == 32_000


def test_publish_while_server_down_ends_with_clear_errors(nats_server_function):
    server = nats_server_function
    nc = jetstream_sync.connect(server.url, reconnect_wait=0.2, max_reconnect_attempts=-1, pending_size=64 * 1024)
    try:
        js = nc.jetstream(timeout=1)
        js.create_stream(StreamConfig(name="DOWN", subjects=["down.>"]))
        in_flight = [js.publish_async("down.a", b"x" * 100) for _ in range(200)]
        server.stop()
        outcomes = concurrent.futures.wait(in_flight, timeout=10)
        assert not outcomes.not_done  # every future resolved, with an ack or an error
        # the client has seen the server go (else the publish below goes out and is cut off: NotConnectedError,
        # "lost before the reply came", which CI met under load when all 200 were acked before the stop)
        wait_until(lambda: not nc.is_connected, timeout=10)
        with pytest.raises(errors.TimeoutError, match="connection is down"):
            js.publish("down.a", b"x")
        with pytest.raises(errors.NotConnectedError, match="reconnect buffer"):
            for _ in range(10_000):
                nc.publish("down.core", b"y" * 1024)
        # The reconnect buffer is (nearly) full: how much room is left depends on when nats-py swapped its
        # transport, so this publish fails either at once or through its future; it never hangs.
        with pytest.raises((errors.TimeoutError, errors.NotConnectedError)):
            js.publish_async("down.a", b"z").result(timeout=5)
    finally:
        nc.close()


def test_async_futures_resolve_on_close(nats_server, name):
    nc = jetstream_sync.connect(nats_server.url)
    js = nc.jetstream()
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    futures = [js.publish_async(f"{name}.a", b"x") for _ in range(2000)]
    nc.close()
    done, not_done = concurrent.futures.wait(futures, timeout=5)
    assert not not_done
    for f in done:
        if f.exception() is not None:
            assert isinstance(f.exception(), (errors.ConnectionClosedError, errors.NotConnectedError))
    with pytest.raises(errors.ConnectionClosedError):
        js.publish_async(f"{name}.a", b"x")
