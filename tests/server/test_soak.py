"""Soak: producers and consumers in several threads while the link is cut and stalled and the server restarts
on a schedule. Opt-in (``pytest -m soak -s``; CI runs it). Prints one figure line; nothing may be lost."""

from __future__ import annotations

import os
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StorageType, StreamConfig, errors
from jetstream_sync.testing import EmbeddedServer, FaultProxy
from tests.helpers import wait_until

SOAK_SECONDS = float(os.environ.get("JETSTREAM_SYNC_SOAK_SECONDS", "60"))


class Figures:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked_ids: set[int] = set()
        self.processed_ids: set[int] = set()
        self.deliveries = 0
        self.faults = 0
        self.publish_errors = 0

    def processed(self, ident: int) -> None:
        with self.lock:
            self.deliveries += 1
            self.processed_ids.add(ident)


@pytest.mark.soak
def test_soak_under_cuts_stalls_and_restarts():
    figures = Figures()
    stop_producing = threading.Event()
    with EmbeddedServer() as server, FaultProxy(server) as proxy:
        nc = jetstream_sync.connect(proxy.url, name="soak", reconnect_wait=0.1, max_reconnect_attempts=-1, timeout=2)
        try:
            js = nc.jetstream(timeout=2)
            stream = js.create_stream(StreamConfig(name="SOAK", subjects=["soak.>"], storage=StorageType.FILE))
            cons = stream.create_consumer(ConsumerConfig(durable_name="workers", ack_wait=2, max_deliver=-1))

            def produce(worker: int) -> None:
                ident = worker
                while not stop_producing.is_set():
                    batch = []
                    for _ in range(100):
                        try:
                            batch.append((ident, js.publish_async("soak.x", b"%d" % ident, msg_id=str(ident))))
                        except errors.JetStreamError:
                            figures.publish_errors += 1
                            time.sleep(0.05)  # back-off before publishing again during a fault
                            continue
                        ident += 2
                    for i, fut in batch:
                        try:
                            fut.result(timeout=5)
                        except errors.JetStreamError:
                            figures.publish_errors += 1
                            _republish(js, i)
                        with figures.lock:
                            figures.acked_ids.add(i)

            def handle(msg: jetstream_sync.Msg) -> None:
                figures.processed(int(msg.data))
                msg.ack()

            contexts = [
                cons.consume(handle, max_messages=200, expires=5, idle_heartbeat=1, error_handler=lambda exc: None)
                for _ in range(2)
            ]
            producers = [
                threading.Thread(target=produce, args=(w,), name=f"soak-producer-{w}", daemon=True) for w in range(2)
            ]
            for p in producers:
                p.start()

            started = time.monotonic()
            schedule = [_cut, _stall, _cut, _restart]
            step = 0
            while time.monotonic() - started < SOAK_SECONDS:
                time.sleep(min(4.0, max(0.0, SOAK_SECONDS - (time.monotonic() - started))))  # the fault schedule
                if time.monotonic() - started >= SOAK_SECONDS:
                    break
                schedule[step % len(schedule)](proxy, server)
                figures.faults += 1
                step += 1
            stop_producing.set()
            for p in producers:
                p.join(60)
            wait_until(lambda: figures.acked_ids <= figures.processed_ids, timeout=60)
            stored = stream.info().state.messages
            for ctx in contexts:
                ctx.stop()
            lost = len(figures.acked_ids - figures.processed_ids)
            duplicates = figures.deliveries - len(figures.processed_ids)
            print(
                f"\nSOAK {SOAK_SECONDS:g}s: published={len(figures.acked_ids)} stored={stored} "
                f"processed={len(figures.processed_ids)} lost={lost} duplicates={duplicates} "
                f"reconnects={nc.reconnects} faults={figures.faults} publish_retries={figures.publish_errors}"
            )
            assert lost == 0
            assert stored == len(figures.acked_ids)  # msg_id dedup: every retry stored once
            assert nc.reconnects >= 3
        finally:
            stop_producing.set()  # also when an assertion failed: the producers must not outlive the test
            nc.close()


def _republish(js, ident: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            js.publish("soak.x", b"%d" % ident, msg_id=str(ident), timeout=2)
            return
        except errors.JetStreamError:
            time.sleep(0.1)  # back-off before publishing again during a fault
    raise AssertionError(f"message {ident} could not be published within 60 s")


def _cut(proxy: FaultProxy, server: EmbeddedServer) -> None:
    proxy.cut()


def _stall(proxy: FaultProxy, server: EmbeddedServer) -> None:
    proxy.stall("both")
    time.sleep(2.5)  # longer than twice the idle heartbeat: the consumers must notice and recover
    proxy.resume()


def _restart(proxy: FaultProxy, server: EmbeddedServer) -> None:
    server.restart()
