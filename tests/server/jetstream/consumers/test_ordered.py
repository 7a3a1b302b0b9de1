"""Ordered consumers (pull, as nats.go's OrderedConsumer) against a real server: order, continuation between
reads, one read at a time, until_drained, deliver policies, and the resets after a deleted consumer, a cut
connection or a deleted stream."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, DeliverPolicy, OrderedConsumerConfig, StreamConfig, errors
from tests.helpers import wait_parked, wait_until


def publish(js, subject: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_complete(timeout=10)


def numbers(msgs) -> list[int]:
    return [int(m.data) for m in msgs]


def contiguous(msgs) -> bool:
    seqs = [m.metadata.sequence.stream for m in msgs]
    return seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else True


def read(it, n: int, timeout: float = 5.0) -> list[jetstream_sync.Msg]:
    """``n`` messages from a MessagesIterator, each within ``timeout``."""
    return [it.next(timeout) for _ in range(n)]


# -- fetch ------------------------------------------------------------------------------------------------
def test_fetch_in_order_with_a_filter(js, stream, name):
    for i in range(20):
        js.publish_async(f"{name}.{'a' if i % 2 == 0 else 'b'}", b"%d" % i)
    js.publish_async_complete(timeout=10)
    oc = stream.ordered_consumer(OrderedConsumerConfig(filter_subjects=[f"{name}.a"]))
    started = time.monotonic()
    got = list(oc.fetch(6, expires=2))
    assert time.monotonic() - started < 1, "a full batch must not wait for expiry"
    assert numbers(got) == [0, 2, 4, 6, 8, 10]
    assert {m.subject for m in got} == {f"{name}.a"}
    assert [m.metadata.sequence.stream for m in got] == [1, 3, 5, 7, 9, 11]
    assert [m.metadata.sequence.consumer for m in got] == [1, 2, 3, 4, 5, 6]
    assert oc.stream_sequence == 11


def test_fetch_continues_after_the_previous_one(js, stream, name):
    publish(js, f"{name}.x", 10)
    oc = js.ordered_consumer(name)
    assert oc.stream_sequence == 0
    first = list(oc.fetch(4, expires=1))
    second = list(oc.fetch_bytes(10_000, expires=1))  # by bytes: the rest (6 messages), then expiry
    assert numbers(first) == [0, 1, 2, 3]
    assert numbers(second) == [4, 5, 6, 7, 8, 9]
    assert oc.stream_sequence == 10
    assert list(oc.fetch_no_wait(5)) == []
    publish(js, f"{name}.x", 3, start=10)
    assert numbers(oc.fetch_no_wait(5)) == [10, 11, 12]
    assert oc.stream_sequence == 13
    assert contiguous(first + second)


def test_consumer_deleted_between_fetches_is_replaced(js, stream, name):
    publish(js, f"{name}.x", 10)
    oc = stream.ordered_consumer()
    assert numbers(oc.fetch(3, expires=1)) == [0, 1, 2]
    old = oc.name
    js.delete_consumer(name, old)
    started = time.monotonic()
    got = list(oc.fetch(3, expires=1))
    assert numbers(got) == [3, 4, 5], f"after the deletion: {numbers(got)} in {time.monotonic() - started:.2f}s"
    assert oc.name != old
    assert oc.name is not None and oc.name.rsplit("_", 1)[0] == old.rsplit("_", 1)[0]
    assert numbers(oc.fetch(10, expires=1)) == [6, 7, 8, 9]


def test_consumer_deleted_during_a_fetch_the_fetch_goes_on_on_a_new_link(nats_server, js, stream, name):
    oc = stream.ordered_consumer()
    got: list[jetstream_sync.Msg] = []
    t = threading.Thread(target=lambda: got.extend(oc.fetch(5, expires=2.5)))
    t.start()
    old = oc.name
    with jetstream_sync.connect(nats_server.url) as other:
        ojs = other.jetstream()
        wait_until(lambda: ojs.consumer_info(name, old).num_waiting >= 1)  # the fetch's pull waits at the server
        ojs.delete_consumer(name, old)
        started = time.monotonic()
        publish(ojs, f"{name}.x", 5)
    t.join(5)
    assert numbers(got) == [0, 1, 2, 3, 4], f"{numbers(got)} after {time.monotonic() - started:.2f}s"
    assert oc.name != old


def test_fetch_after_a_reconnect_continues_on_a_new_link(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream(timeout=2)
        stream = js.create_stream(StreamConfig(name="CUTFETCH", subjects=["cutfetch.>"]))
        publish(js, "cutfetch.x", 6)
        oc = stream.ordered_consumer()
        assert numbers(oc.fetch(3, expires=1)) == [0, 1, 2]
        old = oc.name
        fault_proxy.cut()
        wait_until(lambda: nc.reconnects >= 1 and nc.is_connected)
        assert numbers(oc.fetch(3, expires=1)) == [3, 4, 5]
        assert oc.name != old


def test_second_concurrent_fetch_is_refused(js, stream, name):
    oc = stream.ordered_consumer()
    got: list[jetstream_sync.Msg] = []
    failures: list[BaseException] = []

    def reader() -> None:
        try:
            got.extend(oc.fetch(5, expires=2))
        except BaseException as exc:  # reported to the test thread
            failures.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    wait_parked([t])  # the first fetch is out and its reader waits for messages
    with pytest.raises(errors.OrderedConsumerInUseError):
        oc.fetch(1, expires=1)
    with pytest.raises(errors.OrderedConsumerInUseError):
        oc.messages()
    publish(js, f"{name}.x", 5)
    t.join(5)
    assert not t.is_alive() and not failures
    assert numbers(got) == [0, 1, 2, 3, 4]
    assert list(oc.fetch_no_wait(5)) == []  # the first fetch ended: reading again is fine


def test_fetch_while_messages_runs_is_refused_and_allowed_after_stop(js, stream, name):
    publish(js, f"{name}.x", 10)
    oc = stream.ordered_consumer()
    it = oc.messages(max_messages=5, expires=2)
    assert numbers(read(it, 3)) == [0, 1, 2]
    with pytest.raises(errors.OrderedConsumerInUseError):
        oc.fetch(1, expires=1)
    with pytest.raises(errors.OrderedConsumerInUseError):
        oc.next(1)
    with pytest.raises(errors.OrderedConsumerInUseError):
        oc.messages()
    with pytest.raises(errors.OrderedConsumerInUseError):
        oc.consume(lambda m: None)
    it.stop()
    assert numbers(oc.fetch(10, expires=1)) == [3, 4, 5, 6, 7, 8, 9]


def test_a_new_read_after_stopping_messages_continues_after_the_last_message_handed_out(js, stream, name):
    publish(js, f"{name}.x", 300)
    oc = stream.ordered_consumer()
    it = oc.messages(max_messages=100, expires=2)
    first = read(it, 25)
    wait_until(lambda: it.stats().buffered > 0)  # more was received than handed out
    it.stop()
    second = list(oc.fetch(25, expires=1))  # a fetch goes on from there
    with oc.messages(max_messages=50, expires=2) as it2:  # and so does another iterator
        third = read(it2, 50)
    handled: list[jetstream_sync.Msg] = []
    ctx = oc.consume(handled.append, until_drained=True)  # and a consume, to the end
    ctx.wait(5)
    got = first + second + third + handled
    assert numbers(got) == list(range(300)), f"{len(got)} messages, first wrong at index " + str(
        next((i for i, n in enumerate(numbers(got)) if n != i), None)
    )
    assert contiguous(got)


def test_stream_sequence_follows_messages_handed_out_by_messages(js, stream, name):
    publish(js, f"{name}.x", 10)
    oc = stream.ordered_consumer()
    with oc.messages(max_messages=5, expires=2) as it:
        read(it, 3)
        assert oc.stream_sequence == 3
    assert oc.stream_sequence == 3


def test_next_with_nothing_raises_timeout_in_bounded_time(js, stream, name):
    oc = stream.ordered_consumer()
    started = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        oc.next(0.5)
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 1.5, f"next(0.5) gave up after {elapsed:.2f}s"
    publish(js, f"{name}.x", 2)
    assert numbers([oc.next(1), oc.next(1)]) == [0, 1]


# -- until_drained ----------------------------------------------------------------------------------------
def test_messages_until_drained_ends_when_caught_up(js, stream, name):
    publish(js, f"{name}.x", 1234)
    oc = stream.ordered_consumer()
    with oc.messages(until_drained=True, max_messages=100) as it:
        got = list(it)
    assert numbers(got) == list(range(1234))
    assert contiguous(got)
    assert it.stats().messages_delivered == 1234


def test_consume_until_drained_ends_when_caught_up(js, stream, name):
    publish(js, f"{name}.x", 777)
    oc = stream.ordered_consumer()
    got: list[jetstream_sync.Msg] = []
    ctx = oc.consume(got.append, until_drained=True, max_messages=100)
    ctx.wait(5)
    assert ctx.error is None
    assert numbers(got) == list(range(777))
    assert ctx.stats().messages_delivered == 777


def test_until_drained_ends_when_what_was_pending_vanishes_before_delivery(js, stream, name):
    """The last pending messages are deleted after the first 50 were delivered (each saying more are
    pending): no message will say "caught up", so after a second of silence the read asks the server, finds
    nothing left and ends, where it would otherwise wait forever."""
    publish(js, f"{name}.x", 100)
    oc = stream.ordered_consumer()
    with oc.messages(until_drained=True, max_messages=50, threshold_messages=0) as it:
        first = it.next(5)
        wait_until(lambda: it.stats().buffered == 49)  # the first pull's 50 are in; the next is not sent yet
        for seq in range(51, 101):
            stream.delete_msg(seq)
        started = time.monotonic()
        rest = list(it)
        took = time.monotonic() - started
    assert numbers([first, *rest]) == list(range(50))
    assert took < 4
    assert oc.caught_up


def test_caught_up_from_the_last_message_without_asking(js, stream, name):
    publish(js, f"{name}.x", 20)
    oc = stream.ordered_consumer()
    with oc.messages() as it:
        read(it, 20)
        assert oc.caught_up  # the 20th said nothing is pending
        publish(js, f"{name}.x", 1, start=20)
        assert numbers(read(it, 1)) == [20]


def test_until_drained_on_an_empty_stream_ends_at_once(js, stream, name):
    oc = stream.ordered_consumer()
    started = time.monotonic()
    with oc.messages(until_drained=True) as it:
        assert list(it) == []
    ctx = oc.consume(lambda m: None, until_drained=True)
    ctx.wait(2)
    assert time.monotonic() - started < 1
    filtered = stream.ordered_consumer(OrderedConsumerConfig(filter_subjects=[f"{name}.none"]))
    publish(js, f"{name}.x", 5)  # the stream has messages, none matching the filter
    with filtered.messages(until_drained=True) as it:
        assert list(it) == []


def test_until_drained_includes_messages_published_after_the_handle_was_made(js, stream, name):
    oc = stream.ordered_consumer()  # the stream is empty now
    publish(js, f"{name}.x", 5)
    with oc.messages(until_drained=True) as it:
        assert numbers(it) == [0, 1, 2, 3, 4]


# -- configuration ----------------------------------------------------------------------------------------
@pytest.fixture
def six(js, stream, name):
    """Six messages alternating between two subjects, a0 b1 a2 b3 a4 b5 at stream sequences 1..6."""
    for i in range(6):
        js.publish(f"{name}.{'ab'[i % 2]}", b"%d" % i)
    return stream


def test_deliver_policies_place_the_first_message(js, six, name):
    def first(**kwargs) -> list[int]:
        return numbers(six.ordered_consumer(OrderedConsumerConfig(**kwargs)).fetch_no_wait(10))

    assert first() == [0, 1, 2, 3, 4, 5]
    assert first(deliver_policy=DeliverPolicy.ALL) == [0, 1, 2, 3, 4, 5]
    assert first(deliver_policy=DeliverPolicy.LAST) == [5]
    assert first(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=4) == [3, 4, 5]
    start = six.get_msg(3).time
    assert first(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=start) == [2, 3, 4, 5]
    assert first(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, filter_subjects=[f"{name}.>"]) == [4, 5]
    assert first(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, filter_subjects=[f"{name}.a"]) == [4]
    new = six.ordered_consumer(OrderedConsumerConfig(deliver_policy=DeliverPolicy.NEW))
    assert list(new.fetch_no_wait(10)) == []
    js.publish(f"{name}.a", b"6")
    assert numbers(new.fetch(10, expires=0.5)) == [6]


def test_new_policy_survives_a_reset_before_the_first_message(js, six, name):
    new = six.ordered_consumer(OrderedConsumerConfig(deliver_policy=DeliverPolicy.NEW))
    js.delete_consumer(six.name, new.name)
    js.publish(f"{name}.a", b"6")
    assert numbers(new.fetch(10, expires=0.5)) == [6]


def test_headers_only(js, stream, name):
    js.publish(f"{name}.x", b"y" * 100, headers={"K": "v"})
    oc = stream.ordered_consumer(OrderedConsumerConfig(headers_only=True))
    msg = oc.next(1)
    assert msg.data == b""
    assert msg.headers["K"] == "v"
    assert msg.headers["Nats-Msg-Size"] == "100"
    assert oc.info().config.headers_only is True


def test_server_side_consumer_config(js, stream, name):
    oc = stream.ordered_consumer(
        OrderedConsumerConfig(
            inactive_threshold=30, name_prefix="mine", metadata={"k": "v"}, filter_subjects=[f"{name}.a"]
        )
    )
    assert oc.name == "mine_1"
    info = oc.info()
    cfg = info.config
    assert info.name == "mine_1"
    assert cfg.durable_name is None
    assert cfg.ack_policy is AckPolicy.NONE
    assert cfg.max_deliver == 1
    assert cfg.mem_storage is True
    assert cfg.num_replicas in (None, 0, 1)
    assert cfg.inactive_threshold == 30
    assert cfg.filter_subject == f"{name}.a"
    assert cfg.metadata is not None and cfg.metadata["k"] == "v"
    js.delete_consumer(name, "mine_1")
    publish(js, f"{name}.a", 1)
    assert numbers(oc.fetch(1, expires=1)) == [0]
    assert oc.name == "mine_2"
    assert oc.info().config.inactive_threshold == 30


def test_missing_stream_is_stream_not_found(js, name):
    with pytest.raises(errors.StreamNotFoundError):
        js.ordered_consumer(name)


# -- resets -----------------------------------------------------------------------------------------------
def test_consumer_deleted_mid_messages_is_a_counted_reset_without_gap_or_duplicate(nats_server, js, stream, name):
    publish(js, f"{name}.x", 50)
    oc = stream.ordered_consumer()
    # Pulls that outlive the test's waits: a pull expiring under load would be renewed, and a renewal that
    # reaches the deleted consumer first is told "no responders" instead of the waiting pull's 409.
    with jetstream_sync.connect(nats_server.url) as other, oc.messages(max_messages=20, expires=30) as it:
        got = read(it, 50)
        old = oc.name
        wait_until(lambda: oc.info().num_waiting >= 1)  # a pull waits at the server: it will hear the deletion
        other.jetstream().delete_consumer(name, old)
        wait_until(lambda: it.stats().resets >= 1, timeout=5)
        publish(js, f"{name}.x", 50, start=50)
        got += read(it, 50)
        stats = it.stats()
    assert numbers(got) == list(range(100))
    assert contiguous(got)
    assert stats.resets == 1, stats
    assert set(stats.reset_reasons) <= {"consumer deleted", "no responders"}, stats  # both say it is gone
    assert oc.name != old


def test_consumer_deleted_with_no_pull_waiting_is_noticed_by_the_next_pull(js, stream, name):
    publish(js, f"{name}.x", 1000)
    oc = stream.ordered_consumer()
    with oc.messages(max_messages=100, expires=2) as it:
        got = read(it, 50)
        js.delete_consumer(name, oc.name)  # every pull so far was served in full: nobody waits to hear a 409
        got += read(it, 950)
        stats = it.stats()
    assert numbers(got) == list(range(1000))
    assert contiguous(got)
    assert stats.resets >= 1, stats
    assert set(stats.reset_reasons) <= {"no responders", "consumer deleted"}, stats


def test_cut_connection_is_a_reconnect_reset_without_gap_or_duplicate(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream(timeout=2)
        stream = js.create_stream(StreamConfig(name="CUT", subjects=["cut.>"]))
        publish(js, "cut.x", 40)
        oc = stream.ordered_consumer()
        with oc.messages(max_messages=10, expires=2) as it:
            got = read(it, 25)
            fault_proxy.cut()
            wait_until(lambda: it.stats().reset_reasons.get("reconnect", 0) >= 1, timeout=3)
            publish(js, "cut.x", 40, start=40)
            got += read(it, 55)
            stats = it.stats()
    assert numbers(got) == list(range(80))
    assert contiguous(got)
    assert stats.reset_reasons["reconnect"] >= 1, stats


def test_stream_deleted_mid_messages_ends_with_reset_error_after_max_attempts(js, stream, name):
    publish(js, f"{name}.x", 5)
    oc = stream.ordered_consumer(OrderedConsumerConfig(max_reset_attempts=2))
    seen: list[BaseException] = []
    it = oc.messages(expires=2, error_handler=seen.append)
    got = read(it, 5)
    wait_until(lambda: oc.info().num_waiting >= 1)
    js.delete_stream(name)
    started = time.monotonic()
    with pytest.raises(errors.OrderedConsumerResetError) as info:
        for msg in it:
            got.append(msg)
    assert time.monotonic() - started < 3
    assert numbers(got) == [0, 1, 2, 3, 4]
    assert isinstance(info.value.__cause__, errors.StreamNotFoundError), repr(info.value.__cause__)
    # the error handler runs on the callbacks thread, maybe after the iteration raised
    wait_until(lambda: any(isinstance(e, errors.OrderedConsumerResetError) for e in seen), timeout=2)


def test_fetch_after_the_stream_was_deleted_raises_reset_error(js, stream, name):
    publish(js, f"{name}.x", 2)
    oc = stream.ordered_consumer(OrderedConsumerConfig(max_reset_attempts=2))
    assert numbers(oc.fetch(2, expires=1)) == [0, 1]
    js.delete_stream(name)
    started = time.monotonic()
    with pytest.raises(errors.OrderedConsumerResetError):
        for _ in range(3):  # the first fetch may only learn that the link is gone; the next one recreates it
            list(oc.fetch(1, expires=0.5))
    assert time.monotonic() - started < 3


# -- acceptance -------------------------------------------------------------------------------------------
TOTAL = 50_000
FIRST_PART = 10_000  # published before the read; the rest once the first consumer was deleted (see below)


def test_acceptance_50k_in_order_through_deletion_restart_and_stall(nats_server_function, fault_proxy):
    """50,000 messages read in order, without gap or duplicate, through a consumer deleted by another client
    (at 10k), a server restart (at 20k) and a stalled link past twice the heartbeat (at 30k).

    The deletion must reach a pull waiting at the server to be heard as 409 "consumer deleted" (a deleted
    consumer nobody waits on is only noticed by the next pull, as "no responders"): the first 10,000 messages
    are published before the read, so at 10,000 the reader is caught up and its pull waits; the other 40,000
    once the deletion was counted.
    """
    server = nats_server_function
    nc = jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1, max_reconnect_attempts=-1, timeout=2)
    direct = jetstream_sync.connect(server.url, reconnect_wait=0.1, max_reconnect_attempts=-1, timeout=2)
    resumer: threading.Thread | None = None
    try:
        js = nc.jetstream(timeout=2)
        djs = direct.jetstream(timeout=2)
        stream = js.create_stream(
            StreamConfig(name="ORDERED", subjects=["ordered.>"], storage=jetstream_sync.StorageType.FILE)
        )
        publish(js, "ordered.x", FIRST_PART)
        oc = stream.ordered_consumer()
        data: list[int] = []
        seqs: list[int] = []
        restart_reasons: dict[str, int] = {}
        stalled_detected = threading.Event()
        started = time.monotonic()
        with oc.messages(idle_heartbeat=0.5, expires=2, error_handler=lambda exc: None) as it:

            def reasons(reason: str) -> int:
                return it.stats().reset_reasons.get(reason, 0)

            def delete_consumer() -> None:  # caught up: a pull waits at the server; another client deletes
                live = oc.name
                assert live is not None
                wait_until(lambda: djs.consumer_info("ORDERED", live).num_waiting >= 1, timeout=5)
                djs.delete_consumer("ORDERED", live)
                # Heard as 409 on the waiting pull; if that pull expired at that very moment, the next pull hears
                # the deletion as "no responders" instead: either way it is a counted reset.
                wait_until(lambda: reasons("consumer deleted") + reasons("no responders") >= 1, timeout=5)
                publish(djs, "ordered.x", TOTAL - FIRST_PART, start=FIRST_PART)

            def restart() -> None:
                before = it.stats()
                server.restart()
                # Heard as a reconnect; or as a missed heartbeat when the silence came first; or, when a pull
                # buffered while disconnected reaches the restarted server before the reconnect is reported,
                # as "no responders" (or the catch-up probe's "consumer deleted"): the link did not survive
                # the restart. The new consumer is made once JetStream has recovered its file store.
                wait_until(lambda: it.stats().resets > before.resets, timeout=15)
                after = it.stats().reset_reasons
                restart_reasons.update(
                    {
                        r: n - before.reset_reasons.get(r, 0)
                        for r, n in after.items()
                        if n > before.reset_reasons.get(r, 0)
                    }
                )

            def missed() -> bool:
                return it.stats().heartbeats_missed >= 1 or reasons("missed heartbeat") >= 1

            def resume_once_detected() -> None:
                try:
                    wait_until(missed, timeout=15)
                    stalled_detected.set()
                finally:
                    fault_proxy.resume()

            for i in range(TOTAL):
                if i == FIRST_PART:
                    delete_consumer()
                elif i == 20_000:
                    restart()
                elif i == 30_000:  # the reader goes on, so the server owes messages while the link is silent
                    fault_proxy.stall()
                    resumer = threading.Thread(target=resume_once_detected, name="test-resume")
                    resumer.start()
                msg = it.next(20)
                data.append(int(msg.data))
                seqs.append(msg.metadata.sequence.stream)
            stats = it.stats()
        elapsed = time.monotonic() - started
        assert resumer is not None
        resumer.join(5)
        assert stalled_detected.is_set(), f"the stall was never detected: {stats}"
        wrong = next((i for i, n in enumerate(data) if n != i), None)
        assert wrong is None, f"data out of order from index {wrong}: {data[wrong : wrong + 5]} ({stats})"
        assert len(data) == TOTAL
        assert seqs == list(range(1, TOTAL + 1)), f"stream sequences not contiguous ({stats})"
        reasons = stats.reset_reasons
        deleted = reasons.get("consumer deleted", 0) + reasons.get("no responders", 0)
        assert deleted >= 1, f"no reset for the deleted consumer: {reasons}, {elapsed:.1f}s"
        assert reasons.get("missed heartbeat", 0) >= 1, f"no reset for the stalled link: {reasons}, {elapsed:.1f}s"
        link_lost = {"reconnect", "missed heartbeat", "no responders", "consumer deleted"}
        assert restart_reasons and set(restart_reasons) <= link_lost, f"restart: {restart_reasons} of {reasons}"
        assert stats.resets >= 3 and sum(reasons.values()) >= stats.resets, f"every reset has a reason: {stats}"
        assert elapsed < 20, f"50k ordered messages through 3 faults took {elapsed:.1f}s: {stats}"
    finally:
        fault_proxy.resume()
        if resumer is not None:
            resumer.join(20)
        direct.close()
        nc.close()
