"""How a service's handlers run: a bounded thread pool with per-endpoint concurrency, a 503 at once when an
endpoint is full (never an unbounded queue), discovery answered while every handler is busy, and a graceful stop.

There was no services code before this (no ``jetstream_sync.services``): every test here is new behaviour.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import jetstream_sync
from jetstream_sync import Msg, errors
from jetstream_sync.services import Request, Service, ServiceClient, ServiceInstance
from tests.helpers import wait_until


class Gate:
    """A handler's brake: counts the handlers inside and lets them out when opened."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.lock = threading.Lock()
        self.inside = 0
        self.peak = 0

    def __call__(self, request: Request) -> bytes:
        with self.lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        try:
            assert self.open.wait(10), "the test never opened the gate"
        finally:
            with self.lock:
                self.inside -= 1
        return b"done " + request.data


class Replies:
    """Requests published with reply subjects on one inbox; the replies by request number."""

    def __init__(self, client) -> None:
        self.client = client
        self.inbox = client.new_inbox()
        self.sub = client.subscribe(f"{self.inbox}.*")

    def send(self, subject: str, n: int) -> None:
        self.client.publish(subject, str(n).encode(), reply=f"{self.inbox}.{n}")

    def take(self, count: int, timeout: float = 5.0) -> dict[int, Msg]:
        got = {}
        for _ in range(count):
            msg = self.sub.next_msg(timeout)
            got[int(msg.subject.rsplit(".", 1)[1])] = msg
        return got


def error_code(msg: Msg) -> str | None:
    return msg.headers.get("Nats-Service-Error-Code") if msg.raw_headers else None


def test_a_full_endpoint_answers_503_at_once_while_the_others_are_served(client, started, name):
    gate = Gate()
    service = Service(name, "1.0.0", workers=2)
    service.add_endpoint("slow", gate, concurrency=1, max_pending=2)
    service.add_endpoint("fast", lambda request: b"fast")
    instance = service.start(client)
    started.append(instance)
    replies = Replies(client)
    replies.send("slow", 0)
    wait_until(lambda: gate.inside == 1)
    for n in range(1, 6):
        replies.send("slow", n)
    began = time.monotonic()
    refused = replies.take(3)  # 1 running, 2 waiting: the other 3 are answered at once
    assert time.monotonic() - began < 2.0
    assert sorted(refused) == [3, 4, 5]
    for msg in refused.values():
        assert error_code(msg) == "503" and "endpoint 'slow' is busy" in msg.headers["Nats-Service-Error"]
    assert client.request("fast", timeout=2).data == b"fast"  # the second worker serves the other endpoint
    gate.open.set()
    done = replies.take(3)
    assert {n: m.data for n, m in done.items()} == {0: b"done 0", 1: b"done 1", 2: b"done 2"}
    assert gate.peak == 1  # concurrency=1: one at a time, although two workers exist
    (slow,) = [e for e in instance.stats().endpoints if e.name == "slow"]
    assert (slow.num_requests, slow.num_errors) == (6, 3) and slow.last_error.startswith("503:endpoint 'slow' is busy")
    replies.send("slow", 6)  # it takes requests again once it caught up
    assert replies.take(1)[6].data == b"done 6"


def test_discovery_is_answered_at_once_while_every_handler_is_busy(client, started, name):
    gate = Gate()
    service = Service(name, "1.0.0", workers=3)
    service.add_endpoint("busy", gate, max_pending=50)
    instance = service.start(client)
    started.append(instance)
    replies = Replies(client)
    for n in range(20):
        replies.send("busy", n)
    wait_until(lambda: gate.inside == 3)  # every worker held, 17 waiting
    services = ServiceClient(client)
    for ask in (services.ping, services.info, services.stats):
        began = time.monotonic()
        assert [answer.id for answer in ask(name, instance.id)] == [instance.id]
        assert time.monotonic() - began < 1.0
    assert instance.stats().endpoints[0].num_requests == 0  # counted as they finish
    gate.open.set()
    assert len(replies.take(20)) == 20
    assert gate.peak == 3


def test_many_callers_on_a_small_pool_all_get_their_own_answer(client, started, name):
    service = Service(name, "1.0.0", workers=4)
    service.add_endpoint("double", lambda request: str(2 * int(request.data)).encode())
    started.append(service.start(client))

    def call(n: int) -> bytes:
        return client.request("double", str(n).encode(), timeout=5).data

    with ThreadPoolExecutor(8) as callers:
        results = list(callers.map(call, range(400)))
    assert results == [str(2 * n).encode() for n in range(400)]


def test_stop_takes_no_new_requests_and_finishes_those_it_took(client, started, name):
    gate = Gate()
    service = Service(name, "1.0.0", workers=1)
    service.add_endpoint("slow", gate)
    instance = service.start(client)
    replies = Replies(client)
    replies.send("slow", 0)
    wait_until(lambda: gate.inside == 1)
    replies.send("slow", 1)
    replies.send("slow", 2)
    client.flush(2)
    stopper = threading.Thread(target=instance.stop, args=(10,))
    stopper.start()
    services = ServiceClient(client, timeout=0.5)
    wait_until(lambda: services.ping(name) == [], timeout=5)  # gone from discovery
    with pytest.raises(errors.NoRespondersError):
        client.request("slow", b"late", timeout=2)  # no new requests
    assert stopper.is_alive() and not instance.is_running  # waiting for the three it took
    gate.open.set()
    stopper.join(5)
    assert not stopper.is_alive() and instance.wait(0)
    assert {n: m.data for n, m in replies.take(3).items()} == {0: b"done 0", 1: b"done 1", 2: b"done 2"}


def test_a_stop_past_its_timeout_answers_what_waits_503_and_says_so(client, started, name):
    gate = Gate()
    service = Service(name, "1.0.0", workers=1)
    service.add_endpoint("stuck", gate)
    instance = service.start(client)
    replies = Replies(client)
    replies.send("stuck", 0)
    wait_until(lambda: gate.inside == 1)
    replies.send("stuck", 1)
    client.flush(2)
    began = time.monotonic()
    with pytest.raises(
        errors.TimeoutError, match=r"1 handler\(s\) still running .* 1 waiting request\(s\) answered 503"
    ):
        instance.stop(0.5)
    assert time.monotonic() - began < 3.0 and instance.wait(0)
    refused = replies.take(1)[1]
    assert error_code(refused) == "503" and refused.headers["Nats-Service-Error"] == "the service is stopping"
    gate.open.set()  # the handler in hand still finishes, and its answer still goes
    assert replies.take(1)[0].data == b"done 0"


def test_a_handler_may_stop_its_service_by_systemexit_or_by_stop(client, name):
    service = Service(name, "1.0.0", workers=2)
    instance: list[ServiceInstance] = []

    @service.endpoint()
    def leave(request: Request) -> bytes:
        raise SystemExit(3)

    @service.endpoint()
    def stop(request: Request) -> bytes:
        instance[0].stop(5)  # from a handler: it does not wait for itself
        return b"stopping"

    first = service.start(client)
    reply = client.request("leave", timeout=2)
    assert error_code(reply) == "500" and reply.headers["Nats-Service-Error"] == "SystemExit"
    assert first.wait(5) and isinstance(first.error, SystemExit)
    instance.append(service.start(client))
    assert client.request("stop", timeout=5).data == b"stopping"
    assert instance[0].wait(5) and instance[0].error is None


def queued(instance: ServiceInstance, endpoint: str) -> int:
    """Requests of ``endpoint`` waiting for a worker (the pool's own count: nothing public says it)."""
    return next(live.lane.waiting for live in instance._live if live.endpoint.name == endpoint)


def innermost(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or 0)
    return frame.f_code.co_name if frame is not None else ""


def test_a_burst_of_quick_replies_is_written_by_the_worker_in_one_send(client, nats_server, started, name):
    # the replies of requests that waited together go out in one write from the worker that ran them, not one
    # IO-thread wake-up per burst (fails on the code before: every reply went through the IO thread)
    hold = Gate()
    service = Service(name, "1.0.0", workers=1)
    service.add_endpoint("hold", hold)
    service.add_endpoint("quick", lambda request: b"quick " + request.data)
    instance = service.start(client)
    started.append(instance)
    gate = client._runtime._nc.gate
    with jetstream_sync.connect(nats_server.url, name="caller") as caller:
        replies = Replies(caller)
        replies.send("hold", 0)
        wait_until(lambda: hold.inside == 1)
        for n in range(1, 21):
            replies.send("quick", n)
        wait_until(lambda: queued(instance, "quick") == 20)
        # the IO thread back in its select: it holds no lock the worker's write only tries (else the IO thread
        # writes the burst, in one send too, but then this cannot tell who did)
        wait_until(lambda: innermost(client._runtime._io.thread) == "select")
        before = gate.direct_writes
        hold.open.set()
        got = replies.take(21)
        # counted once the worker's send returned, which may be after the caller got the replies
        wait_until(lambda: gate.direct_writes > before)
        assert gate.direct_writes - before <= 2  # 21 replies, one send (two if the socket took part)
    assert got[0].data == b"done 0"
    assert {n: got[n].data for n in range(1, 21)} == {n: b"quick %d" % n for n in range(1, 21)}
    assert instance.stats().endpoints[1].num_requests == 20


def test_replies_do_not_wait_for_a_handler_known_to_be_slow(client, started, name):
    # a worker holds the replies of quick handlers to send them together, but writes them before it runs a
    # handler whose endpoint usually takes long
    hold, stall = Gate(), Gate()

    def slow(request: Request) -> bytes:
        if request.data == b"warm":
            time.sleep(0.01)  # its average is now far above what counts as quick
            return b"warm"
        return stall(request)

    service = Service(name, "1.0.0", workers=1)
    service.add_endpoint("hold", hold)
    service.add_endpoint("quick", lambda request: b"quick " + request.data)
    service.add_endpoint("slow", slow)
    instance = service.start(client)
    started.append(instance)
    assert client.request("slow", b"warm", timeout=5).data == b"warm"
    replies = Replies(client)
    replies.send("hold", 0)
    wait_until(lambda: hold.inside == 1)
    replies.send("quick", 1)
    replies.send("slow", 2)
    wait_until(lambda: queued(instance, "quick") == 1 and queued(instance, "slow") == 1)
    hold.open.set()
    got = replies.take(2)  # while the slow handler cannot have returned: its gate is still shut
    assert not stall.open.is_set()
    assert (got[0].data, got[1].data) == (b"done 0", b"quick 1")
    stall.open.set()
    assert replies.take(1)[2].data == b"done 2"


def stall_after_a_quick_reply(client, started, name) -> tuple[Replies, Gate]:
    """One worker runs request 0 (held at a gate), then quick 1 and quick 2 from one burst; quick 2 stalls at
    ``stall`` (returned, shut) after quick 1's reply and request 0's were queued without being written."""
    hold, stall = Gate(), Gate()

    def quick(request: Request) -> bytes:
        return stall(request) if request.data == b"2" else b"quick " + request.data

    service = Service(name, "1.0.0", workers=1)
    service.add_endpoint("hold", hold)
    service.add_endpoint("quick", quick)
    instance = service.start(client)
    started.append(instance)
    replies = Replies(client)
    replies.send("hold", 0)
    wait_until(lambda: hold.inside == 1)
    replies.send("quick", 1)
    replies.send("quick", 2)
    wait_until(lambda: queued(instance, "quick") == 2)
    hold.open.set()
    wait_until(lambda: stall.inside == 1)
    return replies, stall


def test_replies_held_behind_an_unexpectedly_slow_handler_go_out_with_the_next_request(client, started, name):
    # a handler of a quick endpoint that stalls holds the replies its worker made before it; the IO thread
    # writes them as soon as it takes in the next request
    replies, stall = stall_after_a_quick_reply(client, started, name)
    replies.send("quick", 3)
    got = replies.take(2)
    assert stall.inside == 1
    assert (got[0].data, got[1].data) == (b"done 0", b"quick 1")
    stall.open.set()
    got = replies.take(2)
    assert (got[2].data, got[3].data) == (b"done 2", b"quick 3")


def test_replies_held_behind_an_unexpectedly_slow_handler_go_out_within_a_tick_when_no_request_comes(
    client, started, name
):
    # as above, but nothing comes in after the stall: the watchdog's tick writes the held replies (before, they
    # waited for the stalled handler, here 10 s, longer than most callers' timeouts)
    replies, stall = stall_after_a_quick_reply(client, started, name)
    got = replies.take(2, timeout=2)
    assert stall.inside == 1
    assert (got[0].data, got[1].data) == (b"done 0", b"quick 1")
    stall.open.set()
    assert replies.take(1)[2].data == b"done 2"
