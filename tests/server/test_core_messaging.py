"""Core NATS for synchronous code (issue 38, items 2 and 7): subscriptions with a handler, Msg.respond(),
auto-unsubscribe, the delivered counter, request_many (scatter-gather), and a drain that loses nothing."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import defaultdict

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, errors
from tests.helpers import wait_until


def out_msgs(server, name: str) -> int:
    """What the server says it sent to the connection named ``name`` (its /connz)."""
    with urllib.request.urlopen(f"{server.monitor_url}/connz?limit=1024", timeout=5) as response:
        conns = json.load(response)["connections"]
    return sum(c["out_msgs"] for c in conns if c.get("name") == name)


# -- handlers ---------------------------------------------------------------------------------------------------
def test_a_handler_gets_each_message_in_order_on_the_subscriptions_own_thread(client):
    seen: list[tuple[bytes, str]] = []
    sub = client.subscribe("h.order", handler=lambda m: seen.append((m.data, threading.current_thread().name)))
    for i in range(200):
        client.publish("h.order", b"%d" % i)
    client.flush()
    wait_until(lambda: len(seen) == 200)
    assert [data for data, _ in seen] == [b"%d" % i for i in range(200)]
    assert {name for _, name in seen} == {"jetstream-sync-sub-h.order"}
    assert sub.handled == 200 and sub.delivered == 200
    sub.unsubscribe()


def test_a_handler_that_raises_is_reported_and_the_subscription_goes_on(client):
    reported: list[BaseException] = []
    handled: list[bytes] = []

    def handler(msg):
        if msg.data == b"bad":
            raise ValueError("a bad message")
        handled.append(msg.data)

    sub = client.subscribe("h.raise", handler=handler, error_handler=reported.append)
    for data in (b"1", b"bad", b"2", b"bad", b"3"):
        client.publish("h.raise", data)
    client.flush()
    wait_until(lambda: handled == [b"1", b"2", b"3"] and len(reported) == 2)
    assert all(isinstance(e, ValueError) for e in reported)
    assert sub.is_active
    sub.unsubscribe()


def test_a_handler_that_raises_without_an_error_handler_is_logged_with_its_traceback(client, caplog):
    # Without an error_handler nor an error_callback the WARNING is all a person gets: it must show the line of
    # the handler that failed, not only the exception's message.
    def handler(msg):
        raise LookupError("no such order")

    sub = client.subscribe("h.raise.logged", handler=handler)
    with caplog.at_level("WARNING", logger="jetstream_sync"):
        client.publish("h.raise.logged", b"x")
        client.flush()
        # the handler appends a record before it writes its formatted text (the traceback): wait for the text
        wait_until(lambda: 'raise LookupError("no such order")' in caplog.text)
    (record,) = [r for r in caplog.records if r.exc_info]
    assert record.exc_info[0] is LookupError
    assert "LookupError('no such order')" in record.getMessage()
    assert 'raise LookupError("no such order")' in caplog.text  # the traceback names the failing line
    assert sub.is_active
    sub.unsubscribe()


def test_a_handler_that_raises_system_exit_ends_only_its_subscription(client):
    sub = client.subscribe("h.exit", handler=lambda m: (_ for _ in ()).throw(SystemExit(3)))
    client.publish("h.exit", b"x")
    client.flush()
    assert sub.wait_handled(5)
    assert isinstance(sub.error, SystemExit)
    wait_until(lambda: not sub.is_active)
    client.flush()  # the client goes on
    with pytest.raises(errors.InvalidArgumentError, match="handler"):
        sub.next_msg(timeout=0.1)


def test_workers_run_a_handler_on_several_threads_and_ordered_by_keeps_each_key_in_order(client):
    per_key: dict[str, list[int]] = defaultdict(list)
    threads: set[str] = set()
    lock = threading.Lock()

    def handler(msg):
        time.sleep(0.001)  # the handler's own work: long enough for the workers to overlap
        with lock:
            per_key[msg.subject].append(int(msg.data))
            threads.add(threading.current_thread().name)

    sub = client.subscribe("h.keys.*", handler=handler, workers=4, ordered_by=lambda m: m.subject)
    for i in range(400):
        client.publish(f"h.keys.{i % 8}", b"%d" % i)
    client.flush()
    wait_until(lambda: sum(len(v) for v in per_key.values()) == 400, timeout=20)
    assert all(values == sorted(values) for values in per_key.values())
    assert len(threads) > 1 and all(name.startswith("jetstream-sync-sub-h.keys.*-w") for name in threads)
    sub.drain(timeout=5)


def test_handler_options_are_checked_before_subscribing(client):
    with pytest.raises(errors.InvalidArgumentError, match="handler"):
        client.subscribe("h.x", workers=2)
    with pytest.raises(errors.InvalidTypeError, match="callable"):
        client.subscribe("h.x", handler="not a function")

    async def coroutine(msg):
        return None

    with pytest.raises(errors.InvalidTypeError, match="plain function"):
        client.subscribe("h.x", handler=coroutine)
    with pytest.raises(errors.InvalidArgumentError, match="max_msgs"):
        client.subscribe("h.x", max_msgs=-1)


# -- respond, auto-unsubscribe, delivered --------------------------------------------------------------------------
def test_respond_answers_a_request_and_refuses_what_cannot_be_answered(client, js, stream):
    client.subscribe("svc.echo", handler=lambda m: m.respond(m.data.upper(), headers={"Echoed": "yes"}))
    reply = client.request("svc.echo", b"hello", timeout=5)
    assert reply.data == b"HELLO" and reply.headers["Echoed"] == "yes"

    plain = client.subscribe("svc.plain")
    client.publish("svc.plain", b"no reply subject")
    with pytest.raises(errors.InvalidArgumentError, match="no reply subject"):
        plain.next_msg(timeout=5).respond(b"x")

    js.publish(f"{stream.name}.a", b"stored")
    cons = stream.create_consumer(ConsumerConfig(durable_name="r", ack_policy=AckPolicy.EXPLICIT))
    msg = cons.next(timeout=5)
    with pytest.raises(errors.InvalidAckSubjectError, match="ack"):
        msg.respond(b"x")
    msg.ack()


def test_max_msgs_ends_a_subscription_after_that_many_messages(client):
    sub = client.subscribe("auto.a", max_msgs=3)
    for i in range(10):
        client.publish("auto.a", b"%d" % i)
    client.flush()
    assert [m.data for m in sub] == [b"0", b"1", b"2"]  # iteration ends after the third
    assert sub.delivered == 3 and not sub.is_active


def test_auto_unsubscribe_counts_what_was_received_already(client):
    sub = client.subscribe("auto.b")
    client.publish("auto.b", b"0")
    client.flush()
    wait_until(lambda: sub.delivered == 1)
    sub.auto_unsubscribe(3)
    for i in range(1, 10):
        client.publish("auto.b", b"%d" % i)
    client.flush()
    assert [m.data for m in sub] == [b"0", b"1", b"2"]


# -- request_many ----------------------------------------------------------------------------------------------
@pytest.fixture
def responders(client):
    """Three responders on svc.many (a fourth, slow one answers after a second)."""
    subs = [client.subscribe("svc.many", handler=lambda m, i=i: m.respond(b"r%d" % i)) for i in range(3)]
    subs.append(client.subscribe("svc.many", handler=lambda m: (time.sleep(1.0), m.respond(b"slow"))))
    yield subs
    for sub in subs:
        sub.unsubscribe()


def test_request_many_ends_at_max_replies(client, responders):
    replies = list(client.request_many("svc.many", b"?", max_replies=2, timeout=5))
    assert len(replies) == 2


def test_request_many_ends_at_its_timeout_with_what_came(client, responders):
    started = time.monotonic()
    replies = [m.data for m in client.request_many("svc.many", b"?", timeout=0.5)]
    assert sorted(replies) == [b"r0", b"r1", b"r2"]  # the slow one answers after the timeout
    assert time.monotonic() - started < 3


def test_request_many_ends_when_the_replies_stall(client, responders):
    started = time.monotonic()
    replies = list(client.request_many("svc.many", b"?", timeout=10, stall=0.3))
    assert len(replies) == 3
    assert time.monotonic() - started < 5  # ended by the stall, long before the 10 s timeout


def test_request_many_ends_at_a_sentinel(client):
    def stream_back(msg):
        for i in range(3):
            msg.respond(b"part %d" % i)
        msg.respond(b"")  # the sentinel

    sub = client.subscribe("svc.parts", handler=stream_back)
    replies = [m.data for m in client.request_many("svc.parts", timeout=10, sentinel=True)]
    assert replies == [b"part 0", b"part 1", b"part 2"]
    sub.unsubscribe()


def test_request_many_with_no_responders_raises(client):
    with pytest.raises(errors.NoRespondersError):
        list(client.request_many("svc.nobody", timeout=5))


def test_request_many_left_early_unsubscribes_its_inbox(client, responders, nats_server):
    inbox = ""

    def subscribed() -> bool:
        with urllib.request.urlopen(f"{nats_server.monitor_url}/subsz?subs=1&limit=100000", timeout=5) as response:
            return inbox in {sub["subject"] for sub in json.load(response).get("subscriptions_list") or []}

    with client.request_many("svc.many", b"?", timeout=5) as replies:
        inbox = replies.inbox
        next(replies)
        assert subscribed()
    client.flush()

    wait_until(lambda: not subscribed())


# -- drain ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_handler", [False, True], ids=["read", "handler"])
def test_drain_delivers_what_the_server_sent_before_it_saw_the_unsub(fault_proxy, nats_server_function, with_handler):
    """A publisher runs throughout; the drain happens with messages in flight (a 50 ms proxy delay). Before, the
    handler was dropped before the UNSUB reached the server: the server said it sent more than the client got."""
    fault_proxy.set_latency(0.05)
    received: list[bytes] = []
    stop = threading.Event()
    with (
        jetstream_sync.connect(fault_proxy.url, name="drained") as nc,
        jetstream_sync.connect(nats_server_function.url, name="publisher") as pub,
    ):
        if with_handler:
            sub = nc.subscribe("drain.x", handler=lambda m: received.append(m.data))
        else:
            sub = nc.subscribe("drain.x")
        nc.flush()  # the server has the subscription before the publisher starts

        def publish() -> None:
            i = 0
            while not stop.is_set():
                pub.publish("drain.x", b"%d" % i)
                i += 1
                if i % 50 == 0:
                    pub.flush()

        publisher = threading.Thread(target=publish)
        publisher.start()
        try:
            wait_until(lambda: sub.delivered >= 500, timeout=20)
            sub.drain(timeout=10)
        finally:
            stop.set()
            publisher.join()
        if not with_handler:
            received = [m.data for m in sub]
        sent = out_msgs(nats_server_function, "drained")
        assert len(received) == sent == sub.delivered, (len(received), sent, sub.delivered)
        assert received == [b"%d" % i for i in range(len(received))]  # in order, nothing missing in between
