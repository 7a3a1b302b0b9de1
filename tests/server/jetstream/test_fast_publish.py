"""js.fast_publisher(): 2.14 fast ingest, acknowledged in bulk with flow control."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import BatchAck, FastPubAck, StreamConfig, errors
from tests.helpers import wait_until


@pytest.fixture
def fast(js, name):
    return js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_batched=True))


def test_a_batch_is_acknowledged_in_bulk(js, name, fast):
    with js.fast_publisher(flow=100) as pub:
        first = pub.add(f"{name}.a", b"0")
        assert first == FastPubAck(batch_sequence=1, ack_sequence=0)
        for i in range(1, 500):
            pub.add(f"{name}.a", b"%d" % i, headers={"N": str(i)})
        wait_until(lambda: pub.acked >= 400, timeout=5)  # flow acks every 100
    ack = pub.ack
    assert isinstance(ack, BatchAck)
    assert (ack.stream, ack.batch_id, ack.batch_size, ack.seq) == (name, pub.batch_id, 500, 500)
    assert pub.closed
    assert fast.info().state.messages == 500
    last = fast.get_msg(500)
    assert (last.data, last.headers["N"]) == (b"499", "499")


def test_commit_with_a_last_message(js, name, fast):
    pub = js.fast_publisher(flow=10, max_outstanding_acks=1)
    for i in range(50):
        pub.add(f"{name}.a", b"%d" % i)
    ack = pub.commit(f"{name}.a", b"last")
    assert ack.batch_size == 51 and fast.get_msg(51).data == b"last"
    with pytest.raises(errors.InvalidArgumentError, match="ended"):
        pub.add(f"{name}.a", b"late")


def test_a_refused_message_ends_the_batch_and_what_came_before_stays(js, name, fast):
    pub = js.fast_publisher()
    pub.add(f"{name}.a", b"1")
    pub.add(f"{name}.a", b"2")
    pub.add(f"{name}.a", b"3", expected_last_sequence=999)
    with pytest.raises(errors.WrongLastSequenceError):
        pub.commit(f"{name}.a", b"4")
    assert pub.ack is not None and pub.ack.batch_size == 2  # what the server stored
    assert fast.info().state.messages == 2


def test_with_continue_on_gap_a_refused_message_is_reported_and_the_batch_goes_on(js, name, fast):
    reported: list[BaseException] = []
    pub = js.fast_publisher(continue_on_gap=True, error_handler=reported.append)
    pub.add(f"{name}.a", b"1")
    pub.add(f"{name}.a", b"2", expected_last_sequence=999)
    pub.add(f"{name}.a", b"3")
    ack = pub.commit(f"{name}.a", b"4")
    assert ack.batch_size == 4
    wait_until(lambda: len(reported) == 1, timeout=5)
    assert isinstance(reported[0], errors.WrongLastSequenceError) and "message 2" in str(reported[0])
    assert [fast.get_msg(seq).data for seq in (1, 2, 3)] == [b"1", b"3", b"4"]


def test_a_stream_without_batches_refuses_at_the_first_add(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    pub = js.fast_publisher()
    with pytest.raises(errors.BatchPublishNotEnabledError):
        pub.add(f"{name}.a", b"1")
    assert pub.closed
    assert js.stream_info(name).state.messages == 0


def test_a_block_that_raises_still_ends_the_batch(js, name, fast):
    with pytest.raises(KeyError), js.fast_publisher() as pub:
        for i in range(10):
            pub.add(f"{name}.a", b"%d" % i)
        raise KeyError("stop")
    assert pub.closed and pub.ack is not None and pub.ack.batch_size == 10  # not atomic: what was sent is stored
    with js.fast_publisher() as empty:
        pass
    assert empty.closed and empty.ack is None


def test_bad_arguments_are_refused(js, name, fast, monkeypatch):
    for kwargs, error in [
        ({"flow": 0}, errors.InvalidArgumentError),
        ({"flow": 70_000}, errors.InvalidArgumentError),
        ({"max_outstanding_acks": 4}, errors.InvalidArgumentError),
        ({"continue_on_gap": "yes"}, errors.InvalidTypeError),
        ({"error_handler": 5}, errors.InvalidTypeError),
        ({"timeout": -1}, errors.InvalidArgumentError),
    ]:
        with pytest.raises(error):
            js.fast_publisher(**kwargs)
    with js.fast_publisher() as pub:
        with pytest.raises(errors.InvalidArgumentError, match="subject"):
            pub.add("bad subject", b"x")
        pub.add(f"{name}.a", b"ok")  # the refused add left the batch as it was
    assert pub.ack is not None and pub.ack.batch_size == 1
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.13.0"})
    with pytest.raises(errors.FeatureNotSupportedError, match="fast-ingest"):
        js.fast_publisher()


def test_a_lost_flow_ack_is_recovered_by_a_ping(fault_proxy):
    """The server's second flow ack is dropped on its way: add stalls, pings after a third of the timeout,
    the server answers with its latest ack, and the batch goes on."""
    with jetstream_sync.connect(fault_proxy.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="FASTPING", subjects=["fp.>"], allow_batched=True))
        pub = js.fast_publisher(flow=10, max_outstanding_acks=1, timeout=3)
        lost = fault_proxy.drop_next("downstream", f"{pub._inbox}.>", skip=1)  # flow ack 0 passes, ack 10 is lost
        for i in range(40):
            pub.add("fp.x", b"%d" % i)
        assert lost.wait(timeout=5)
        assert pub.commit("fp.x", b"last").batch_size == 41
        assert js.stream_info("FASTPING").state.messages == 41
