"""messages() and consume() (ADR-37 "Consume"): options, pending counts, statuses, heartbeats, stopping."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StorageType, StreamConfig, errors
from tests.helpers import wait_parked, wait_until


def publish(js, subject: str, n: int, size: int = 8) -> None:
    for i in range(n):
        js.publish_async(subject, (b"%08d" % i).ljust(size, b"."))
    js.publish_async_complete(timeout=20)


@pytest.fixture
def cons(stream):
    return stream.create_consumer(ConsumerConfig(durable_name="c", ack_wait=30))


class Recorder:
    """Collects what reaches an error handler, and from which thread."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.threads: set[str] = set()

    def __call__(self, exc: BaseException) -> None:
        self.threads.add(threading.current_thread().name)
        self.errors.append(exc)

    def of(self, kind: type) -> list[BaseException]:
        return [e for e in self.errors if isinstance(e, kind)]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_messages": 10, "max_bytes": 1000}, "max_bytes"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"expires": 0.5}, "expires"),
        ({"expires": 4, "idle_heartbeat": 3}, "idle_heartbeat"),
        ({"idle_heartbeat": 0.1}, "idle_heartbeat"),
        ({"expires": 120, "idle_heartbeat": 31}, "idle_heartbeat"),
        ({"max_messages": 10, "threshold_messages": 11}, "threshold_messages"),
        ({"max_bytes": 100, "threshold_bytes": 101}, "threshold_bytes"),
        ({"threshold_bytes": 10}, "threshold_bytes"),
        ({"max_messages": "5"}, "max_messages"),
    ],
)
def test_invalid_options_fail_before_anything_is_sent(client, cons, kwargs, field):
    before = client.stats["out_msgs"]
    with pytest.raises((ValueError, TypeError)) as info:
        cons.messages(**kwargs)
    assert info.value.field == field
    with pytest.raises((ValueError, TypeError)):
        cons.consume(lambda m: None, **kwargs)
    assert client.stats["out_msgs"] == before


def test_handler_and_error_handler_must_be_plain_callables(cons):
    async def coroutine(msg):
        return None

    with pytest.raises(TypeError):
        cons.consume(None)
    with pytest.raises(TypeError):
        cons.consume(coroutine)
    with pytest.raises(TypeError):
        cons.consume(lambda m: None, error_handler="log")


def test_messages_iterator_delivers_everything_and_stops(js, stream, cons, caplog):
    publish(js, f"{stream.name}.a", 1200)
    seen = []
    with caplog.at_level(logging.DEBUG, logger="jetstream_sync"), cons.messages(max_messages=100) as it:
        for msg in it:
            msg.ack()
            seen.append(msg.metadata.sequence.stream)
            if len(seen) == 1200:
                break
        stats = it.stats()
    assert seen == list(range(1, 1201))
    assert stats.messages_delivered == 1200 and stats.pulls_sent >= 12
    assert any("pull batch=" in r.getMessage() for r in caplog.records)
    with pytest.raises(errors.IteratorClosedError):
        it.next(timeout=0.1)
    assert it.closed


def test_iterator_next_times_out_then_gets_a_late_message(js, stream, cons):
    with cons.messages(expires=2) as it:
        with pytest.raises(errors.TimeoutError):
            it.next(timeout=0.2)
        js.publish(f"{stream.name}.a", b"late")
        assert it.next(timeout=5).data == b"late"


def test_drain_delivers_what_is_buffered_then_ends(js, stream, cons):
    publish(js, f"{stream.name}.a", 50)
    it = cons.messages(max_messages=50)
    wait_until(lambda: it.stats().buffered == 50)
    first = it.next(timeout=1)
    it.drain()
    rest = list(it)
    assert len(rest) == 49
    assert [first, *rest][-1].metadata.sequence.stream == 50


def test_stop_ends_delivery_at_once(js, stream, cons):
    publish(js, f"{stream.name}.a", 50)
    it = cons.messages(max_messages=50)
    wait_until(lambda: it.stats().buffered == 50)
    it.next(timeout=1)
    it.stop()
    assert list(it) == []


def test_consume_runs_the_handler_serially_on_its_own_thread(js, stream, cons):
    publish(js, f"{stream.name}.a", 2000)
    threads, active, overlap = set(), [0], []
    done = threading.Event()
    count = [0]

    def handler(msg):
        active[0] += 1
        if active[0] > 1:
            overlap.append(msg)
        threads.add(threading.current_thread().name)
        msg.ack()
        count[0] += 1
        active[0] -= 1
        if count[0] == 2000:
            done.set()

    ctx = cons.consume(handler, max_messages=300)
    assert done.wait(20)
    ctx.stop()
    ctx.wait(timeout=5)
    assert ctx.closed.is_set() and not overlap
    assert threads == {f"jetstream-sync-consume-{stream.name}/c"}
    stats = ctx.stats()
    assert stats.messages_delivered == 2000
    assert stats.pending_messages <= 300


def test_handler_exceptions_reach_the_error_handler_and_consume_goes_on(js, stream, cons):
    publish(js, f"{stream.name}.a", 10)
    recorder = Recorder()
    handled = []

    def handler(msg):
        handled.append(msg)
        msg.ack()
        if len(handled) % 3 == 0:
            raise RuntimeError("boom")

    ctx = cons.consume(handler, error_handler=recorder)
    wait_until(lambda: len(handled) == 10 and len(recorder.errors) == 3)
    assert recorder.threads == {"jetstream-sync-callbacks"}
    assert not ctx.closed.is_set()
    ctx.stop()
    ctx.wait(5)


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt])
def test_a_handler_raising_systemexit_ends_the_consume_with_the_error(js, stream, cons, exc):
    publish(js, f"{stream.name}.a", 5)
    handled = []

    def handler(msg):
        handled.append(msg)
        msg.ack()
        if len(handled) == 2:
            raise exc("stop here")

    ctx = cons.consume(handler)
    ctx.wait(5)
    assert ctx.closed.is_set()
    assert isinstance(ctx.error, exc)
    assert len(handled) == 2


def test_consume_drain_handles_the_buffer_then_closes(js, stream, cons):
    publish(js, f"{stream.name}.a", 100)
    gate = threading.Event()
    handled = []

    def handler(msg):
        gate.wait(5)
        handled.append(msg)
        msg.ack()

    ctx = cons.consume(handler, max_messages=100)
    wait_until(lambda: ctx.stats().buffered >= 99)
    ctx.drain()
    gate.set()
    ctx.wait(timeout=10)
    assert len(handled) == 100


def test_max_bytes_mode_consumes_everything(js, stream, cons):
    publish(js, f"{stream.name}.a", 500, size=200)
    got = 0
    with cons.messages(max_bytes=4096) as it:
        for msg in it:
            msg.ack()
            got += 1
            assert it.stats().buffered * 200 <= 4096
            if got == 500:
                break
    assert got == 500


def test_max_messages_one_never_gets_stuck(js, stream, cons):
    publish(js, f"{stream.name}.a", 1000)
    done = threading.Event()
    count = [0]

    def handler(msg):
        msg.ack()
        count[0] += 1
        if count[0] == 1000:
            done.set()

    ctx = cons.consume(handler, max_messages=1)
    assert done.wait(30), f"stalled after {count[0]} messages"
    assert ctx.stats().pending_messages <= 1
    ctx.stop()


def test_slow_handler_raises_no_heartbeat_alarm_and_memory_stays_bounded(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="slow", ack_wait=60))
    publish(js, f"{stream.name}.a", 30)
    recorder = Recorder()
    max_ack_pending = [0]
    handled = []

    def handler(msg):
        time.sleep(1.0)  # the handler's own work: twice the idle heartbeat
        max_ack_pending[0] = max(max_ack_pending[0], cons.info().num_ack_pending)
        msg.ack()
        handled.append(msg)

    ctx = cons.consume(handler, error_handler=recorder, max_messages=5, expires=1, idle_heartbeat=0.5)
    wait_until(lambda: len(handled) >= 6, timeout=20)
    ctx.stop()
    ctx.wait(5)
    assert not recorder.of(errors.MissedHeartbeatError)
    assert ctx.stats().heartbeats_missed == 0
    assert max_ack_pending[0] <= 5 + 1


def test_slow_iterator_user_raises_no_heartbeat_alarm(js, stream, cons):
    publish(js, f"{stream.name}.a", 4)
    recorder = Recorder()
    with cons.messages(max_messages=2, expires=1, idle_heartbeat=0.5, error_handler=recorder) as it:
        for _ in range(3):
            it.next(timeout=5).ack()
            time.sleep(1.2)  # time spent in user code between steps is not a missed heartbeat
        assert it.stats().heartbeats_missed == 0
    assert not recorder.of(errors.MissedHeartbeatError)


def test_idle_consume_gets_heartbeats_not_alarms(stream, cons):
    recorder = Recorder()
    ctx = cons.consume(lambda m: m.ack(), error_handler=recorder, expires=2, idle_heartbeat=0.5)
    wait_until(lambda: ctx.stats().statuses.get(408, 0) >= 2, timeout=10)  # expired pulls are replaced quietly
    stats = ctx.stats()
    assert stats.statuses.get(100, 0) >= 3 and stats.heartbeats_missed == 0
    assert stats.pulls_sent >= 3
    ctx.stop()
    assert not recorder.errors


def test_consumer_deleted_ends_consume_and_iterator(js, stream):
    a = stream.create_consumer(ConsumerConfig(durable_name="a"))
    b = stream.create_consumer(ConsumerConfig(durable_name="b"))
    recorder = Recorder()
    ctx = a.consume(lambda m: m.ack(), error_handler=recorder, expires=5)
    it = b.messages(expires=5)
    wait_until(lambda: a.info().num_waiting >= 1 and b.info().num_waiting >= 1)  # both pulls are at the server
    a.delete()
    b.delete()
    ctx.wait(timeout=5)
    assert isinstance(ctx.error, errors.ConsumerDeletedError)
    wait_until(lambda: recorder.of(errors.ConsumerDeletedError))
    with pytest.raises(errors.ConsumerDeletedError):
        it.next(timeout=5)


def test_warnings_reach_the_error_handler_and_consume_goes_on(js, stream):
    limited = stream.create_consumer(ConsumerConfig(durable_name="limited", max_batch=5))
    recorder = Recorder()
    ctx = limited.consume(lambda m: m.ack(), error_handler=recorder, max_messages=20, expires=1, idle_heartbeat=0.5)
    wait_until(lambda: recorder.of(errors.PullWarning), timeout=5)
    assert "MaxRequestBatch" in str(recorder.of(errors.PullWarning)[0])
    assert not ctx.closed.is_set()
    assert ctx.stats().warnings >= 1
    ctx.stop()


def test_max_waiting_warning_then_recovery(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="mw", max_waiting=1))
    blocker = cons.fetch(1, expires=2)
    recorder = Recorder()
    got = []
    ctx = cons.consume(lambda m: (m.ack(), got.append(m)), error_handler=recorder, expires=1, idle_heartbeat=0.5)
    # The server either answers 409 Exceeded MaxWaiting or (2.15) drops the request silently; the latter is
    # caught as a missed heartbeat. Either way the user hears of it and the consume recovers by itself.
    wait_until(lambda: recorder.of(errors.PullWarning) or recorder.of(errors.MissedHeartbeatError), timeout=5)
    list(blocker)  # the fetch expires and frees the waiting slot
    js.publish(f"{stream.name}.a", b"after")
    wait_until(lambda: got, timeout=10)  # a missed heartbeat resets the counts and the consume pulls again
    ctx.stop()


def test_close_ends_consume_and_iterator_promptly(nats_server, name):
    nc = jetstream_sync.connect(nats_server.url)
    js = nc.jetstream()
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
    ctx = cons.consume(lambda m: None)
    it = cons.messages()
    outcome = []

    def read_all():
        try:
            list(it)
        except errors.ConnectionClosedError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read_all)
    reader.start()
    wait_until(lambda: cons.info().num_waiting >= 2)  # the consume's pull and the iterator's are at the server
    (handler_thread,) = [t for t in threading.enumerate() if t.name == f"jetstream-sync-consume-{name}/c"]
    wait_parked([reader, handler_thread])  # and both wait for messages
    started = time.monotonic()
    nc.close()
    # Closing ends both at once; left alone they would wait out the 30 s pull expiry, and a close() that had
    # to give up joining threads takes its 5 s timeout: 3 s keeps those apart with room for a loaded machine.
    ctx.wait(timeout=3.0)
    reader.join(max(0.0, started + 3.0 - time.monotonic()))
    assert not reader.is_alive() and outcome
    assert time.monotonic() - started < 3.0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["consume", "messages", "fetch"])
def test_server_restart_mid_consume_loses_nothing(nats_server_function, mode):
    server = nats_server_function
    total = 20_000
    nc = jetstream_sync.connect(server.url, reconnect_wait=0.2, max_reconnect_attempts=-1)
    stop = threading.Event()
    try:
        js = nc.jetstream(timeout=2)
        js.create_stream(StreamConfig(name="R", subjects=["r.>"], storage=StorageType.FILE))
        cons = js.create_consumer("R", ConsumerConfig(durable_name="w", ack_wait=5))
        seen: set[bytes] = set()
        last_seen = [time.monotonic()]

        def produce():
            for i in range(total):
                while not stop.is_set():
                    try:
                        js.publish("r.x", b"%d" % i, msg_id=str(i))
                        break
                    except errors.ConnectionClosedError:
                        return
                    except errors.JetStreamError:
                        time.sleep(0.05)  # back-off before publishing again while the server restarts

        def handle(msg):
            seen.add(msg.data)
            last_seen[0] = time.monotonic()
            msg.ack()

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        worker = None
        ctx = None
        if mode == "consume":
            ctx = cons.consume(handle, max_messages=200, expires=5, idle_heartbeat=1)
        elif mode == "messages":
            it = cons.messages(max_messages=200, expires=5, idle_heartbeat=1)

            def iterate():
                try:
                    for msg in it:
                        handle(msg)
                except errors.ConnectionClosedError:
                    return

            worker = threading.Thread(target=iterate, daemon=True)
            worker.start()
        else:

            def fetch_loop():
                while not stop.is_set():
                    try:
                        for msg in cons.fetch(200, expires=10):  # a long fetch, caught by the restart
                            handle(msg)
                    except errors.ConnectionClosedError:
                        return
                    except errors.JetStreamError:
                        time.sleep(0.1)  # back-off before fetching again while the server restarts

            worker = threading.Thread(target=fetch_loop, daemon=True)
            worker.start()

        wait_until(lambda: len(seen) >= 5000, timeout=60)
        server.restart()
        back = time.monotonic()
        wait_until(lambda: last_seen[0] > back, timeout=10)
        resumed_after = last_seen[0] - back
        producer.join(120)
        wait_until(lambda: len(seen) == total, timeout=60)
        assert resumed_after < 2.0, resumed_after
        if ctx is not None:
            assert ctx.stats().reconnect_pulls >= 1
            ctx.stop()
        elif mode == "messages":
            assert it.stats().reconnect_pulls >= 1
            it.stop()
        stop.set()
        if worker is not None:
            worker.join(10)
    finally:
        stop.set()  # also when an assertion failed: no helper thread may outlive the test
        nc.close()


def test_stall_longer_than_two_heartbeats_warns_then_recovers(fault_proxy):
    nc = jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.2)
    try:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="STALL", subjects=["stall.>"]))
        cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
        recorder = Recorder()
        got: list[bytes] = []
        ctx = cons.consume(
            lambda m: (m.ack(), got.append(m.data)), error_handler=recorder, expires=5, idle_heartbeat=0.5
        )
        publish(js, "stall.a", 10)
        wait_until(lambda: len(got) == 10)
        fault_proxy.stall("downstream")  # the server's traffic (heartbeats included) stops reaching us
        wait_until(lambda: recorder.of(errors.MissedHeartbeatError), timeout=5)
        assert not ctx.closed.is_set()
        fault_proxy.resume()
        publish(js, "stall.a", 10)
        wait_until(lambda: len(got) == 20, timeout=10)
        assert ctx.stats().heartbeats_missed >= 1
        ctx.stop()
    finally:
        nc.close()


def test_connection_cut_mid_consume_resumes(fault_proxy):
    nc = jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1)
    try:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="CUT", subjects=["cut.>"]))
        cons = stream.create_consumer(ConsumerConfig(durable_name="c", ack_wait=2))
        got: set[tuple[str, bytes]] = set()
        ctx = cons.consume(
            lambda m: (m.ack(), got.add((m.subject, m.data))), max_messages=50, expires=5, idle_heartbeat=1
        )
        publish(js, "cut.a", 500)
        wait_until(lambda: len(got) >= 100)
        fault_proxy.cut()
        wait_until(lambda: nc.reconnects >= 1 and nc.is_connected, timeout=5)
        publish(js, "cut.b", 500)
        wait_until(lambda: len(got) == 1000, timeout=20)
        assert ctx.stats().reconnect_pulls >= 1
        ctx.stop()
    finally:
        nc.close()


def test_a_consumer_deleted_while_disconnected_ends_the_consume(nats_server_function, fault_proxy):
    """ADR-37: after a reconnect the pulls meet no responders; the consume asks whether the consumer still
    exists and, told it does not, ends with ConsumerNotFoundError instead of retrying forever."""
    with jetstream_sync.connect(nats_server_function.url) as admin:
        ajs = admin.jetstream()
        ajs.create_stream(StreamConfig(name="GONE", subjects=["gone.>"]))
        ajs.create_consumer("GONE", ConsumerConfig(durable_name="c"))
        reported: list[BaseException] = []
        with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1) as nc:
            ctx = nc.jetstream().consumer("GONE", "c").consume(lambda m: m.ack(), error_handler=reported.append)
            fault_proxy.refuse(True)
            fault_proxy.cut()
            ajs.delete_consumer("GONE", "c")
            fault_proxy.refuse(False)
            ctx.wait(15)
            assert isinstance(ctx.error, errors.ConsumerNotFoundError)
            wait_until(lambda: any(isinstance(e, errors.ConsumerNotFoundError) for e in reported))  # callbacks thread
