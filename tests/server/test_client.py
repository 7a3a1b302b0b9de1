"""Core client: lifecycle, core publish/subscribe/request, threads, close and fork behaviour."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

import jetstream_sync
from jetstream_sync import errors
from tests.helpers import join_all, our_threads, wait_parked, wait_until


def test_connect_reports_server_and_closes_cleanly(nats_server):
    nc = jetstream_sync.connect(nats_server.url, name="lifecycle")
    assert nc.is_connected
    assert nc.server_info["jetstream"] is True
    assert nc.max_payload == nc.server_info["max_payload"]
    assert nc.connected_url == nats_server.url
    assert "lifecycle" in repr(nc)
    nc.close()
    assert nc.is_closed and not nc.is_connected
    nc.close()  # idempotent
    with pytest.raises(errors.ConnectionClosedError):
        nc.publish("x", b"")
    wait_until(lambda: not our_threads(), timeout=2)


def test_context_manager_closes(nats_server):
    with jetstream_sync.connect(nats_server.url) as nc:
        assert nc.is_connected
    assert nc.is_closed


def test_connect_to_nothing_fails_fast_with_clear_error(unused_port):
    started = time.monotonic()
    with pytest.raises(errors.NoServersError, match="could not connect"):
        jetstream_sync.connect(f"nats://127.0.0.1:{unused_port}", connect_timeout=0.5)
    assert time.monotonic() - started < 10
    wait_until(lambda: not our_threads(), timeout=2)


def test_a_listener_that_never_speaks_times_out_with_a_reason():
    """A port that accepts connections but sends no INFO: the error says the handshake timed out."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with pytest.raises(errors.NoServersError, match=r"timed out \(connect_timeout\).*NATS handshake"):
            jetstream_sync.connect(f"nats://127.0.0.1:{port}", connect_timeout=0.5, max_reconnect_attempts=0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"servers": []}, "servers"),
        ({"tls": "yes"}, "tls"),
        ({"credentials": "/nonexistent/user.creds"}, "credentials"),
        ({"password": "p"}, "password"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"timeout": -1}, "timeout"),
        ({"error_callback": 3}, "error_callback"),
        ({"inbox_prefix": "bad prefix"}, "inbox_prefix"),
        ({"max_reconnect_attempts": "many"}, "max_reconnect_attempts"),
    ],
)
def test_connect_rejects_bad_options(nats_server, kwargs, field):
    servers = kwargs.pop("servers", nats_server.url)
    with pytest.raises((ValueError, TypeError)) as info:
        jetstream_sync.connect(servers, **kwargs)
    assert info.value.field == field
    assert not our_threads()


def test_secrets_stay_out_of_repr(nats_server):
    with jetstream_sync.connect(nats_server.url, user="u", password="s3cr3t-pw", token=None) as nc:
        pass
    assert "s3cr3t-pw" not in repr(nc.options)
    assert "s3cr3t-pw" not in str(nc.options)


def test_publish_subscribe_with_multi_value_headers(client):
    sub = client.subscribe("core.*")
    client.publish("core.a", b"one", headers={"X-Multi": ["1", "2"], "X-One": "v"})
    client.publish("core.b", b"two", reply="core.reply")
    first = sub.next_msg(timeout=2)
    second = sub.next_msg(timeout=2)
    assert (first.subject, first.data) == ("core.a", b"one")
    assert first.headers["X-Multi"] == "1"
    assert first.headers.get_list("X-Multi") == ["1", "2"]
    assert first.headers.multi_items() == [("X-Multi", "1"), ("X-Multi", "2"), ("X-One", "v")]
    assert (second.reply, second.headers) == ("core.reply", {})
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(timeout=0.05)
    with pytest.raises(TimeoutError):  # the builtin catches ours too
        sub.next_msg(timeout=0.05)


def test_queue_groups_split_messages(client):
    a = client.subscribe("work.q", queue="workers")
    b = client.subscribe("work.q", queue="workers")
    for i in range(200):
        client.publish("work.q", str(i).encode())
    client.flush()
    wait_until(lambda: a.pending + b.pending == 200)
    assert a.pending > 0 and b.pending > 0


def test_iteration_ends_after_unsubscribe(client):
    sub = client.subscribe("iter.x")
    for i in range(3):
        client.publish("iter.x", bytes([i]))
    client.flush()
    wait_until(lambda: sub.pending == 3)
    sub.unsubscribe()
    assert [m.data for m in sub] == [b"\x00", b"\x01", b"\x02"]
    with pytest.raises(errors.SubscriptionClosedError):
        sub.next_msg(timeout=0.1)


def test_request_reply_and_no_responders(client):
    service = client.subscribe("svc.echo")

    def serve():
        for msg in service:
            client.publish(msg.reply, b"echo:" + msg.data)

    worker = threading.Thread(target=serve)
    worker.start()
    try:
        reply = client.request("svc.echo", b"hi", timeout=2)
        assert reply.data == b"echo:hi"
        with pytest.raises(errors.NoRespondersError):
            client.request("svc.nobody", b"", timeout=2)
        with pytest.raises(errors.TimeoutError):
            client.subscribe("svc.silent")
            client.request("svc.silent", b"", timeout=0.2)
    finally:
        service.unsubscribe()
        worker.join(2)
    assert not worker.is_alive()


def test_slow_subscription_drops_and_reports(nats_server):
    reported = []
    with jetstream_sync.connect(nats_server.url, error_callback=reported.append) as nc:
        sub = nc.subscribe("slow.x", max_pending=10)
        for _ in range(50):
            nc.publish("slow.x", b"x")
        nc.flush()
        wait_until(lambda: sub.dropped == 40)
        wait_until(lambda: reported)
        assert isinstance(reported[0], errors.SlowConsumerError)
        assert sub.pending == 10


def test_a_subscription_bounds_the_bytes_it_buffers(nats_server):
    """65,536 unread 16 KiB messages would be 1 GiB: max_pending_bytes drops past it, and reading frees room."""
    reported = []
    with jetstream_sync.connect(nats_server.url, error_callback=reported.append) as nc:
        sub = nc.subscribe("bytes.x", max_pending_bytes=100_000)
        for _ in range(10):
            nc.publish("bytes.x", b"x" * 16_384)
        nc.flush()
        wait_until(lambda: sub.pending + sub.dropped == 10)
        assert (sub.pending, sub.dropped, sub.pending_bytes) == (6, 4, 6 * 16_384)
        wait_until(lambda: reported)
        assert isinstance(reported[0], errors.SlowConsumerError)
        assert "100000 bytes" in str(reported[0])
        for _ in range(6):
            sub.next_msg(timeout=1)
        assert sub.pending_bytes == 0
        nc.publish("bytes.x", b"y" * 16_384)  # room again
        assert sub.next_msg(timeout=5).data == b"y" * 16_384
        one_big = nc.subscribe("bytes.big", max_pending_bytes=10)
        nc.publish("bytes.big", b"z" * 1000)  # larger than the bound alone: taken when nothing else waits
        assert one_big.next_msg(timeout=5).data == b"z" * 1000


def test_callbacks_run_on_the_callbacks_thread_never_io_or_watchdog(nats_server):
    seen: list[str] = []
    closed = threading.Event()

    def on_error(exc):
        seen.append(threading.current_thread().name)

    def on_closed():
        seen.append(threading.current_thread().name)
        closed.set()

    nc = jetstream_sync.connect(nats_server.url, error_callback=on_error, closed_callback=on_closed)
    sub = nc.subscribe("cb.x", max_pending=1)
    nc.publish("cb.x", b"1")
    nc.publish("cb.x", b"2")
    nc.flush()
    wait_until(lambda: sub.dropped >= 1)
    nc.close()
    assert closed.wait(2)
    assert seen and all(name == "jetstream-sync-callbacks" for name in seen)


@pytest.mark.parametrize(
    ("call", "exc"),
    [
        (lambda nc: nc.publish("", b""), ValueError),
        (lambda nc: nc.publish("a.*", b""), ValueError),
        (lambda nc: nc.publish("a.>", b""), ValueError),
        (lambda nc: nc.publish("a b", b""), ValueError),
        (lambda nc: nc.publish("a..b", b""), ValueError),
        (lambda nc: nc.publish(3, b""), TypeError),
        (lambda nc: nc.publish("a", "text"), TypeError),
        (lambda nc: nc.publish("a", b"", headers={"K": 1}), TypeError),
        (lambda nc: nc.publish("a", b"", headers={"bad key": "v"}), ValueError),
        (lambda nc: nc.publish("a", b"", headers={"K": "line\r\nbreak"}), ValueError),
        (lambda nc: nc.publish("a", b"x" * (nc.max_payload + 1)), errors.MaxPayloadError),
        (lambda nc: nc.subscribe("a b"), ValueError),
        (lambda nc: nc.subscribe("a", queue="q q"), ValueError),
        (lambda nc: nc.subscribe("a", max_pending=0), ValueError),
        (lambda nc: nc.request("a", b"", timeout=0), ValueError),
        (lambda nc: nc.request("a", b"", timeout=-1), ValueError),
        (lambda nc: nc.flush(timeout="soon"), TypeError),
    ],
)
def test_bad_core_input_is_refused_before_sending(client, call, exc):
    sub = client.subscribe(">")
    with pytest.raises(exc):
        call(client)
    client.flush()
    client.publish("after.bad.input", b"ok")
    msg = sub.next_msg(timeout=2)
    assert msg.subject == "after.bad.input"  # nothing else reached the server, and the connection still works


def test_threads_share_one_client_for_core_publish(client):
    sub = client.subscribe("mt.>")
    threads = [
        threading.Thread(target=lambda t=t: [client.publish(f"mt.{t}", b"%d" % i) for i in range(1000)])
        for t in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.flush()
    wait_until(lambda: sub.pending == 8000)


def test_close_wakes_every_blocked_caller(nats_server):
    nc = jetstream_sync.connect(nats_server.url)
    js = nc.jetstream()
    sub = nc.subscribe("blocked.x")
    silent = nc.subscribe("blocked.silent")  # receives the requests and never answers them
    outcomes: list[tuple[str, type, float]] = []
    lock = threading.Lock()

    def blocked(label, fn):
        started = time.monotonic()
        try:
            fn()
        except Exception as exc:
            with lock:
                outcomes.append((label, type(exc), time.monotonic() - started))

    callers = [
        ("next_msg", lambda: sub.next_msg(timeout=30)),
        ("iterate", lambda: list(sub)),
        ("request", lambda: nc.request("blocked.silent", b"", timeout=30)),
        ("js.publish", lambda: js.publish("blocked.silent", b"", timeout=30)),  # a PubAck that never comes
    ]
    threads = [threading.Thread(target=blocked, args=c) for c in callers for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: silent.pending == 8)  # the 4 requests and 4 publishes reached the server
    wait_parked(threads)  # and every caller is waiting inside its call
    closed_at = time.monotonic()
    nc.close()
    # close() wakes them at once; one left blocked would wait out its 30 s timeout, and a close() that had to
    # give up joining threads takes its 5 s timeout: 3 s keeps those apart with room for a loaded machine.
    assert not join_all(threads, 3.0)
    assert time.monotonic() - closed_at < 3.0
    assert len(outcomes) == len(threads)  # every caller was woken by an exception, none returned
    wrong = [o for o in outcomes if o[1] is not errors.ConnectionClosedError]
    assert not wrong, wrong
    wait_until(lambda: not our_threads(), timeout=2)


#: the ways a process forks: Python's os.fork() (its at-fork hooks run) and a fork made in C, as uWSGI makes its
#: workers and as a C extension may (no hook runs; libc's fork through ctypes.PyDLL, which keeps the GIL held)
FORKS = {"os.fork": "os.fork()", "libc fork": "__import__('ctypes').PyDLL(None).fork()"}


@pytest.mark.parametrize("fork", FORKS.values(), ids=FORKS.keys())
def test_fork_child_gets_clear_error_and_can_connect(nats_server, fork):
    """In the child every call of the parent's client raises ForkedClientError at once (before: after a fork made
    in C a js.publish went out on the parent's socket, was stored, and timed out in the child 5 s later; a core
    publish returned and was never sent), the client does not claim to be connected, and the child exits
    promptly; a client the child makes works."""
    script = f"""
import os, sys, time
import jetstream_sync
from jetstream_sync import StreamConfig, errors
nc = jetstream_sync.connect({nats_server.url!r})
js = nc.jetstream()
js.create_or_update_stream(StreamConfig(name="FORKED", subjects=["forked.>"])).purge()  # the server is shared
pid = {fork}
if pid == 0:
    outcomes = []
    for name, call in (("publish", lambda: nc.publish("forked.core", b"")),
                       ("js.publish", lambda: js.publish("forked.js", b"parent's", timeout=5)),
                       ("flush", lambda: nc.flush(timeout=5)),
                       ("stats_snapshot", nc.stats_snapshot)):
        started = time.monotonic()
        try:
            call()
            outcomes.append(name + " returned")
        except errors.ForkedClientError as exc:
            if "connect a new client" not in str(exc) or time.monotonic() - started > 1:
                outcomes.append(name + " slow or unclear: " + str(exc))
        except BaseException as exc:
            outcomes.append(name + " " + repr(exc))
    if nc.is_connected:
        outcomes.append("is_connected in the child")
    with jetstream_sync.connect({nats_server.url!r}) as child:
        child.jetstream().publish("forked.js", b"child's", timeout=5)
    os.write(2, repr(outcomes).encode())
    os._exit(1 if outcomes else 0)
_, status = os.waitpid(pid, 0)
stored = js.stream_info("FORKED").state.messages
assert stored == 1, f"{{stored}} stored: the child used the parent's client"
nc.close()
sys.exit(os.waitstatus_to_exitcode(status))
"""
    result = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_unclosed_client_does_not_hang_interpreter_exit(nats_server):
    script = f"""
import jetstream_sync
nc = jetstream_sync.connect({nats_server.url!r})
sub = nc.subscribe("exit.x")
nc.publish("exit.x", b"1")
"""
    result = subprocess.run([sys.executable, "-c", script], timeout=30, capture_output=True, text=True)
    assert result.returncode == 0
    assert "Event loop is closed" not in result.stderr
    assert "Traceback" not in result.stderr


def test_drain_delivers_buffered_then_closes(nats_server):
    nc = jetstream_sync.connect(nats_server.url)
    sub = nc.subscribe("drain.x")
    for i in range(5):
        nc.publish("drain.x", bytes([i]))
    nc.flush()
    wait_until(lambda: sub.pending == 5)
    got = []
    reader = threading.Thread(target=lambda: got.extend(m.data for m in sub))
    reader.start()
    nc.drain(timeout=5)
    reader.join(2)
    assert nc.is_closed
    assert got == [bytes([i]) for i in range(5)]


@pytest.mark.parametrize("bad", [None, float("nan"), -1, 1e10, "5"])
def test_a_bad_close_timeout_changes_nothing(nats_server, bad):
    """Refused before anything changes: the client stays open and usable, and a later close() works."""
    before = set(our_threads())
    nc = jetstream_sync.connect(nats_server.url)
    with pytest.raises((errors.InvalidArgumentError, errors.InvalidTypeError), match="timeout"):
        nc.close(timeout=bad)
    assert not nc.is_closed
    nc.flush(timeout=2)
    nc.close(timeout=timedelta(seconds=2))
    assert nc.is_closed
    wait_until(lambda: set(our_threads()) <= before, timeout=5)


def test_ctrl_c_in_main_wakes_non_daemon_readers_so_the_process_exits(nats_server):
    """The main thread ends with KeyboardInterrupt while non-daemon threads block in a subscription read and a
    messages() loop: the clients are closed before Python waits for those threads, so the process ends."""
    script = f"""
import threading
import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
nc = jetstream_sync.connect({nats_server.url!r})
stream = nc.jetstream().create_or_update_stream(StreamConfig(name="EXITG", subjects=["exitg.>"]))
consumer = stream.create_or_update_consumer(ConsumerConfig(durable_name="c"))
sub = nc.subscribe("exitg.core")

def read_subscription():
    try:
        sub.next_msg(timeout=None)
    except errors.ConnectionClosedError:
        print("subscription reader woke", flush=True)

def read_messages():
    try:
        for _ in consumer.messages():
            pass
    except errors.ConnectionClosedError:
        print("messages reader woke", flush=True)

for target in (read_subscription, read_messages):
    threading.Thread(target=target).start()
raise KeyboardInterrupt  # as Ctrl-C in the main thread
"""
    result = subprocess.run([sys.executable, "-c", script], timeout=30, capture_output=True, text=True)
    assert "subscription reader woke" in result.stdout, result.stderr
    assert "messages reader woke" in result.stdout, result.stderr
    assert "KeyboardInterrupt" in result.stderr


def test_a_normal_return_of_main_leaves_non_daemon_threads_their_client(nats_server):
    """Python waits for non-daemon threads after main returns; the client stays open for them until they end."""
    script = f"""
import threading
threading._register_atexit(lambda: print("main has ended", flush=True))  # runs after the library's own hook
import jetstream_sync
nc = jetstream_sync.connect({nats_server.url!r})
sub = nc.subscribe("exitg.later")

def worker():
    print("worker got", sub.next_msg(timeout=20).data.decode(), flush=True)

threading.Thread(target=worker).start()
"""
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "main has ended"
        with jetstream_sync.connect(nats_server.url) as nc:
            nc.publish("exitg.later", b"after main")
            nc.flush()
        out, _ = process.communicate(timeout=30)
    assert out.strip() == "worker got after main"
    assert process.returncode == 0


@pytest.mark.parametrize("fork", FORKS.values(), ids=FORKS.keys())
def test_everything_a_client_made_refuses_use_in_a_forked_child(nats_server, fork):
    """Subscriptions, iterators (one with a parent thread blocked in it at fork time), fetch batches, consume
    contexts, watchers and messages made before fork() raise ForkedClientError in the child, promptly, instead
    of handing out copies of the parent's buffered messages or waiting for ever."""
    script = f"""
import os, signal, sys, threading, time
import jetstream_sync
from jetstream_sync import ConsumerConfig, KeyValueConfig, StreamConfig, errors

nc = jetstream_sync.connect({nats_server.url!r})
js = nc.jetstream()
stream = js.create_or_update_stream(StreamConfig(name="FORKF", subjects=["forkf.>"]))
for _ in range(5):
    js.publish("forkf.a", b"x")
sub = nc.subscribe("forkf.core")
for _ in range(3):
    nc.publish("forkf.core", b"c")
nc.flush()
while sub.pending < 3:
    time.sleep(0.01)  # the poll of a bounded wait: the test's timeout ends the process otherwise
it = stream.create_or_update_consumer(ConsumerConfig(durable_name="c")).messages()
first = it.next(timeout=5)
ctx = stream.create_or_update_consumer(ConsumerConfig(durable_name="d")).consume(lambda m: m.ack())
batch = stream.create_or_update_consumer(ConsumerConfig(durable_name="f")).fetch(5, expires=5)
watcher = js.create_or_update_key_value(KeyValueConfig(bucket="FORKF")).watch_all()
blocked = stream.create_or_update_consumer(ConsumerConfig(durable_name="e", filter_subject="forkf.none")).messages()
reader = threading.Thread(target=blocked.next, daemon=True)
reader.start()
while sys._current_frames()[reader.ident].f_code.co_name != "wait":
    time.sleep(0.01)  # until the parent's reader waits inside the iterator, holding its lock

pid = {fork}
if pid == 0:
    signal.alarm(20)  # a call that hangs ends the child (and fails the test) instead of the run
    calls = {{
        "sub.next_msg": lambda: sub.next_msg(timeout=1),
        "next(iter(sub))": lambda: next(iter(sub)),
        "sub.unsubscribe": sub.unsubscribe,
        "next(iter(it))": lambda: next(iter(it)),
        "it.next": lambda: it.next(timeout=1),
        "blocked.stop": blocked.stop,
        "it.stop": it.stop,
        "ctx.wait": lambda: ctx.wait(timeout=1),
        "ctx.stop": ctx.stop,
        "watcher next": lambda: next(iter(watcher)),
        "watcher.stop": watcher.stop,
        "first.ack": first.ack,
        "next(batch)": lambda: next(batch),
    }}
    for name, call in calls.items():
        try:
            call()
            outcome = "returned"
        except errors.ForkedClientError:
            outcome = "forked"
        except BaseException as exc:
            outcome = repr(exc)
        print(name, "=", outcome, flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), flush=True)
nc.close()
"""
    result = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True, text=True)
    lines = result.stdout.splitlines()
    assert lines[-1:] == ["child exit 0"], (result.stdout, result.stderr[-2000:])
    outcomes = dict(line.split(" = ") for line in lines[:-1])
    assert outcomes == dict.fromkeys(outcomes, "forked") and len(outcomes) == 13, outcomes
