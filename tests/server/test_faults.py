"""Faults injected for real (server restarts, deleted streams, stuck handlers, close under load), each
asserting that nothing is lost and nothing hangs. Figures are printed (run with -s to see them)."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StorageType, StreamConfig, errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import join_all, our_threads, wait_until


def publish_until_acked(js, subject: str, data: bytes, msg_id: str) -> jetstream_sync.PubAck:
    """What a careful producer does after an error: publish again with the same msg_id."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return js.publish(subject, data, msg_id=msg_id)
        except (errors.TimeoutError, errors.NotConnectedError, errors.NoRespondersError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # back-off before the next attempt, as a careful producer does


@pytest.mark.slow
def test_restart_during_publish_async_bursts_stores_each_message_once(nats_server_function):
    server = nats_server_function
    total = 20_000
    nc = jetstream_sync.connect(server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream(timeout=2)
        stream = js.create_stream(StreamConfig(name="BURST", subjects=["burst.>"], storage=StorageType.FILE))
        futures: dict[int, concurrent.futures.Future] = {}
        acked = [0]

        def count(_):
            acked[0] += 1

        def submit(i: int) -> None:
            while True:
                try:
                    fut = js.publish_async("burst.x", b"%d" % i, msg_id=f"m{i}")
                    fut.add_done_callback(count)
                    futures[i] = fut
                    return
                except (errors.NotConnectedError, errors.PublishBackpressureError):
                    time.sleep(0.02)  # back-off while the server restarts or the window is full

        raised: list[BaseException] = []

        def produce() -> None:
            try:
                for i in range(total):
                    submit(i)
            except BaseException as exc:  # any other error is a failure of publish_async: kept for the assert
                raised.append(exc)

        producer = threading.Thread(target=produce)
        producer.start()
        wait_until(lambda: acked[0] >= 5_000, timeout=30)
        server.restart()
        producer.join(60)
        assert not raised, f"publish_async raised {raised[0]!r} during the restart"
        assert not producer.is_alive(), f"the producer was stuck after {len(futures)} publishes"
        _, not_done = concurrent.futures.wait(futures.values(), timeout=30)
        assert not not_done, f"{len(not_done)} futures never resolved"
        failed = [i for i, f in futures.items() if f.exception() is not None]
        kinds = {type(futures[i].exception()).__name__ for i in failed}
        for i in failed:
            publish_until_acked(js, "burst.x", b"%d" % i, f"m{i}")
        state = stream.info().state
        print(
            f"\npublish_async burst with restart: {total} published, {len(failed)} futures failed ({kinds}) and "
            f"were republished, stream holds {state.messages}"
        )
        assert state.messages == total  # each exactly once: the retries were deduplicated
    finally:
        nc.close()


def test_stream_deleted_mid_consume_ends_it_and_the_client_stays_usable(client, js, name):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
    seen: list[BaseException] = []
    ctx = cons.consume(lambda m: m.ack(), error_handler=seen.append, expires=5)
    wait_until(lambda: cons.info().num_waiting >= 1)  # the pull is at the server
    js.delete_stream(name)
    ctx.wait(timeout=5)
    assert isinstance(ctx.error, errors.ConsumerDeletedError)
    again = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    assert js.publish(f"{name}.a", b"still fine").seq == 1
    assert again.get_msg(1).data == b"still fine"


def test_jetstream_disabled_for_the_account_is_a_clear_error():
    config = """
accounts {
  JS: { jetstream: enabled, users: [ { user: js, password: js } ] }
  PLAIN: { users: [ { user: plain, password: plain } ] }
}
"""
    with EmbeddedServer(config=config) as server:
        with jetstream_sync.connect(server.url, user="plain", password="plain") as nc:
            js = nc.jetstream(timeout=2)
            with pytest.raises(errors.JetStreamNotEnabledError):
                js.account_info()
            with pytest.raises(errors.JetStreamNotEnabledError):
                js.create_stream(StreamConfig(name="X", subjects=["x"]))
            sub = nc.subscribe("core.works")  # core NATS goes on
            nc.publish("core.works", b"yes")
            assert sub.next_msg(timeout=2).data == b"yes"
        with jetstream_sync.connect(server.url, user="js", password="js") as nc:
            assert nc.jetstream().account_info().streams == 0


def test_handler_blocking_forever_cannot_block_stop_drain_or_close(nats_server, name):
    nc = jetstream_sync.connect(nats_server.url)
    release = threading.Event()
    try:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
        cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
        entered = threading.Event()

        def stuck(msg):
            entered.set()
            release.wait(60)

        ctx = cons.consume(stuck)
        js.publish(f"{name}.a", b"x")
        assert entered.wait(5)
        started = time.monotonic()
        ctx.drain()
        ctx.stop()
        with pytest.raises(errors.TimeoutError):
            ctx.wait(timeout=0.3)
        nc.close(timeout=1)
        # About 1.3 s: the 0.3 s wait, then close() gives up on the stuck handler after its 1 s timeout. A close()
        # that ignored its timeout would take the 5 s default, one that waited for the handler 60 s.
        assert time.monotonic() - started < 4
        assert nc.is_closed
    finally:
        release.set()
        nc.close()


def test_close_with_work_in_flight_in_16_threads(nats_server, name):
    nc = jetstream_sync.connect(nats_server.url)
    js = nc.jetstream()
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
    for i in range(100):
        js.publish(f"{name}.a", b"%d" % i)
    stop = threading.Event()
    unexpected: list[BaseException] = []
    entered = [threading.Event() for _ in range(16)]

    def loop(kind: int, index: int) -> None:
        entered[index].set()  # just before the first call
        try:
            while not stop.is_set():
                if kind == 0:
                    nc.publish(f"{name}.core", b"x")
                elif kind == 1:
                    js.publish(f"{name}.a", b"x")
                elif kind == 2:
                    js.publish_async(f"{name}.a", b"x")
                elif kind == 3:
                    for msg in cons.fetch(10, expires=1):
                        msg.ack()
                elif kind == 4:
                    with cons.messages(max_messages=10) as it:
                        for msg in it:
                            msg.ack()
                else:
                    nc.request(f"{name}.nobody", b"", timeout=1)
        except (errors.ConnectionClosedError, errors.NoRespondersError):
            return
        except Exception as exc:
            unexpected.append(exc)

    threads = [threading.Thread(target=loop, args=(i % 6, i)) for i in range(16)]
    for t in threads:
        t.start()
    # The work is under way: every thread made its first call, JetStream publishes are being stored, and the
    # fetches and iterators have received messages from their pulls.
    wait_until(lambda: all(e.is_set() for e in entered))
    wait_until(lambda: stream.info().state.messages > 100 and cons.info().delivered.consumer_seq > 0, timeout=10)
    started = time.monotonic()
    nc.close()
    stop.set()
    # close() ends all of it at once; the iterators' pulls would otherwise wait 30 s, and a close() that had to
    # give up joining threads takes its 5 s timeout: 4 s keeps those apart with room for a loaded machine.
    assert not join_all(threads, 4.0)
    assert time.monotonic() - started < 4
    assert not unexpected, unexpected[:3]
    wait_until(lambda: not our_threads(), timeout=3)


def test_no_event_loop_noise_at_interpreter_exit(nats_server):
    script = f"""
import threading, jetstream_sync
from jetstream_sync import StreamConfig, ConsumerConfig
nc = jetstream_sync.connect({nats_server.url!r})
js = nc.jetstream()
js.create_or_update_stream(StreamConfig(name="EXITNOISE", subjects=["exitnoise.>"]))
cons = js.create_or_update_consumer("EXITNOISE", ConsumerConfig(durable_name="c"))
ctx = cons.consume(lambda m: m.ack())
for i in range(200):
    js.publish_async("exitnoise.a", b"x")
threads = [threading.Thread(target=lambda: [nc.publish("exitnoise.core", b"y") for _ in range(1000)]) for _ in range(4)]
for t in threads: t.start()
# exit without closing anything
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for noise in ("Event loop is closed", "Traceback", "Task was destroyed", "coroutine", "Exception ignored"):
        assert noise not in result.stderr, result.stderr


@pytest.mark.parametrize("mode", ["consume", "messages", "fetch"])
def test_cut_connection_mid_read_redelivers_only_unacked(fault_proxy, mode):
    """Acks confirmed by the server (ack_sync) are never redelivered; everything is processed at least once."""
    nc = jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    stop = threading.Event()
    try:
        js = nc.jetstream(timeout=2)
        stream = js.create_stream(StreamConfig(name="CUTR", subjects=["cutr.>"], storage=StorageType.FILE))
        # ack_wait is far longer than an ack_sync takes, so a confirmed ack always beats the redelivery timer
        cons = stream.create_consumer(ConsumerConfig(durable_name="c", ack_wait=5))
        total = 600
        for i in range(total):
            js.publish_async("cutr.x", b"%d" % i)
        js.publish_async_complete(timeout=10)
        lock = threading.Lock()
        confirmed: set[bytes] = set()
        processed: set[bytes] = set()
        redelivered: set[bytes] = set()
        violations: list[bytes] = []
        cut_done = threading.Event()

        def handle(msg):
            with lock:
                if msg.data in confirmed:
                    violations.append(msg.data)  # the server confirmed its ack, yet delivered it again
                if msg.metadata.num_delivered > 1:
                    redelivered.add(msg.data)
                processed.add(msg.data)
            try:
                msg.ack_sync(timeout=1)
            except errors.JetStreamError:
                return  # not confirmed: may come back
            with lock:
                confirmed.add(msg.data)
            if len(confirmed) == 150 and not cut_done.is_set():
                cut_done.set()
                fault_proxy.cut()

        if mode == "consume":
            ctx = cons.consume(handle, max_messages=50, expires=5, idle_heartbeat=1)
            worker = None
        else:

            def read() -> None:
                while not stop.is_set():
                    try:
                        if mode == "messages":
                            with cons.messages(max_messages=50, expires=5, idle_heartbeat=1) as it:
                                for msg in it:
                                    handle(msg)
                                    if stop.is_set():
                                        return
                        else:
                            for msg in cons.fetch(50, expires=2):
                                handle(msg)
                    except errors.ConnectionClosedError:
                        return
                    except errors.JetStreamError:
                        time.sleep(0.05)  # back-off before reading again after the cut

            worker = threading.Thread(target=read, daemon=True)
            worker.start()

        # An ack_sync may fail across the cut although the server recorded the ack (only its reply was lost):
        # done means every message was processed and the server holds nothing pending or unacknowledged.
        def settled() -> bool:
            if len(processed) < total:
                return False
            info = cons.info()
            return info.num_pending == 0 and info.num_ack_pending == 0

        wait_until(settled, timeout=60, interval=0.2)
        stop.set()
        if mode == "consume":
            ctx.stop()
        elif worker is not None:
            nc.close()
            worker.join(5)
        assert cut_done.is_set() and nc.reconnects >= 1
        assert not violations, f"confirmed acks redelivered: {violations[:5]}"
        print(f"\ncut during {mode}: {total} processed, {len(redelivered)} redelivered (all unconfirmed)")
    finally:
        stop.set()  # also when an assertion failed: the reader thread must not outlive the test
        nc.close()
