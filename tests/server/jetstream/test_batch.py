"""js.atomic_batch(): ADR-50 batches are stored all together at the commit, or not at all."""

from __future__ import annotations

import asyncio
import threading

import nats
import pytest

from jetstream_sync import BatchAck, StreamConfig, errors
from jetstream_sync.jetstream.batch import MAX_BATCH_MESSAGES


@pytest.fixture
def atomic(js, name):
    return js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_atomic_publish=True))


def test_a_batch_is_stored_at_the_commit(js, name, atomic):
    with js.atomic_batch() as batch:
        batch.add(f"{name}.a", b"1")
        batch.add(f"{name}.b", b"2", headers={"Trace": "t"})
        assert atomic.info().state.messages == 0  # staged, not stored
        batch.add(f"{name}.c", b"3", msg_id="m-3")
    ack = batch.ack
    assert isinstance(ack, BatchAck)
    assert (ack.stream, ack.seq, ack.batch_id, ack.batch_size) == (name, 3, batch.batch_id, 3)
    assert batch.closed and batch.size == 3
    stored = [atomic.get_msg(seq) for seq in (1, 2, 3)]
    assert [m.data for m in stored] == [b"1", b"2", b"3"]
    assert stored[1].headers["Trace"] == "t"
    assert [m.headers["Nats-Batch-Sequence"] for m in stored] == ["1", "2", "3"]
    assert stored[2].headers["Nats-Batch-Commit"] == "1"


def test_a_single_message_batch_and_an_explicit_commit(js, name, atomic):
    batch = js.atomic_batch(batch_id="order-17")
    batch.add(f"{name}.a", b"only", expected_last_sequence=0)
    ack = batch.commit()
    assert (ack.seq, ack.batch_id, ack.batch_size) == (1, "order-17", 1)
    assert atomic.info().state.messages == 1


def test_a_block_that_raises_stores_nothing(js, name, atomic):
    with pytest.raises(KeyError), js.atomic_batch() as batch:
        batch.add(f"{name}.a", b"1")
        batch.add(f"{name}.b", b"2")
        raise KeyError("the caller changed its mind")
    assert batch.closed and batch.ack is None
    js.publish(f"{name}.after", b"x")  # the stream goes on; nothing of the batch came before this
    assert atomic.info().state.messages == 1


def test_a_failed_commit_raises_and_stores_nothing(js, name, atomic):
    js.publish(f"{name}.a", b"before")
    batch = js.atomic_batch()
    batch.add(f"{name}.a", b"1", expected_last_sequence=5)  # the stream is at 1
    batch.add(f"{name}.b", b"2")
    with pytest.raises(errors.WrongLastSequenceError):
        batch.commit()
    assert batch.closed and batch.ack is None
    with pytest.raises(errors.BatchPublishError) as info, js.atomic_batch() as twice:
        twice.add(f"{name}.a", b"1", msg_id="same")
        twice.add(f"{name}.b", b"2", msg_id="same")
    assert info.value.err_code == 10201
    assert atomic.info().state.messages == 1


def test_a_stream_without_atomic_publish_refuses_at_the_first_message(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    batch = js.atomic_batch()
    batch.add(f"{name}.a", b"1")  # held back until the next add or the commit
    with pytest.raises(errors.BatchPublishNotEnabledError, match="disabled"):
        batch.add(f"{name}.b", b"2")
    assert batch.closed
    with pytest.raises(errors.InvalidArgumentError, match="already closed"):
        batch.add(f"{name}.c", b"3")
    assert js.stream_info(name).state.messages == 0


def test_the_servers_limits_are_checked_before_sending(js, name, atomic):
    with js.atomic_batch() as batch:
        for i in range(MAX_BATCH_MESSAGES):
            batch.add(f"{name}.n", b"%d" % i)
        with pytest.raises(errors.InvalidArgumentError, match="at most 1000"):
            batch.add(f"{name}.n", b"one too many")
    assert batch.ack is not None and batch.ack.batch_size == MAX_BATCH_MESSAGES
    assert atomic.info().state.messages == MAX_BATCH_MESSAGES

    with pytest.raises(errors.InvalidArgumentError, match="batch_id"):
        js.atomic_batch(batch_id="x" * 65)
    with pytest.raises(errors.InvalidTypeError, match="batch_id"):
        js.atomic_batch(batch_id=7)
    batch = js.atomic_batch()
    with pytest.raises(errors.InvalidArgumentError, match="empty"):
        batch.commit()
    with pytest.raises(errors.InvalidArgumentError, match="expected_last_msg_id"):
        batch.add(f"{name}.a", b"1", expected_last_msg_id="m")
    batch.add(f"{name}.a", b"1")
    with pytest.raises(errors.InvalidArgumentError, match="first message"):
        batch.add(f"{name}.b", b"2", expected_last_sequence=1)
    with pytest.raises(errors.InvalidArgumentError, match="subject"):
        batch.add("bad subject", b"2")
    batch.commit()  # the refused adds left nothing behind: one message, committed
    assert batch.ack is not None and batch.ack.batch_size == 1
    with pytest.raises(errors.InvalidArgumentError, match="already committed"):
        batch.commit()


def test_batches_from_several_threads_do_not_mix(js, name, atomic):
    acks: list[BatchAck] = []

    def run(worker: int) -> None:
        with js.atomic_batch() as batch:
            for i in range(50):
                batch.add(f"{name}.w{worker}", b"%d" % i)
        assert batch.ack is not None
        acks.append(batch.ack)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(a.batch_size for a in acks) == [50] * 4
    assert atomic.info().state.messages == 200
    stored = [atomic.get_msg(seq) for seq in range(1, 201)]
    for worker in range(4):  # each batch's messages are stored together, in order
        mine = [int(m.data) for m in stored if m.subject == f"{name}.w{worker}"]
        assert mine == list(range(50))


def test_nats_py_reads_a_committed_batch(nats_server, js, name, atomic):
    with js.atomic_batch() as batch:
        batch.add(f"{name}.a", b"one")
        batch.add(f"{name}.b", b"two")

    async def read() -> list[tuple[str, bytes, str]]:
        nc = await nats.connect(nats_server.url)
        try:
            pyjs = nc.jetstream()
            out = []
            for seq in (1, 2):
                msg = await pyjs.get_msg(name, seq)
                out.append((msg.subject, msg.data, msg.headers["Nats-Batch-Id"]))
            return out
        finally:
            await nc.close()

    assert asyncio.run(read()) == [(f"{name}.a", b"one", batch.batch_id), (f"{name}.b", b"two", batch.batch_id)]


def test_a_message_that_fits_only_without_its_batch_headers_is_refused_before_sending(js, name, atomic):
    limit = js.client.max_payload
    with js.atomic_batch() as batch:
        with pytest.raises(errors.MaxPayloadError, match="max_payload"):
            batch.add(f"{name}.big", b"x" * (limit - 20))  # fits alone; not with Nats-Batch-Id and -Sequence
        batch.add(f"{name}.big", b"x" * (limit - 200))  # with room for them: sent as usual
    assert batch.ack is not None and batch.ack.batch_size == 1
    assert js.client.is_connected and js.publish(f"{name}.after", b"ok").seq == 2  # the connection is unharmed
