"""The socket gate: a synchronous request is written by the thread that waits for it, and the bytes on the wire
stay whole and in order whoever writes them (see jetstream_sync/_runtime/_gate.py)."""

from __future__ import annotations

import socket
import threading

import jetstream_sync
from jetstream_sync import StreamConfig
from jetstream_sync._runtime._gate import SocketGate
from tests.helpers import wait_until


def gate_of(nc: jetstream_sync.Client) -> SocketGate:
    return nc._runtime._nc.gate


def test_a_synchronous_request_is_written_by_the_waiting_thread(client, js, stream):
    gate = gate_of(client)
    assert gate.bound
    before = gate.direct_writes
    for i in range(20):
        assert js.publish(f"{stream.name}.a", b"%d" % i).seq == i + 1
    assert gate.direct_writes - before >= 20
    assert js.stream_info(stream.name).state.messages == 20


def test_a_threads_queued_publishes_reach_the_server_before_its_request(client, js, stream):
    """Core publishes queue for the IO thread; the sync publish after them must not overtake them."""
    sent = 0
    for burst in (1, 2, 7, 50, 300, 1000) * 5:
        for _ in range(burst):
            client.publish(f"{stream.name}.core", b"x")
        sent += burst + 1
        assert js.publish(f"{stream.name}.sync", b"y").seq == sent, f"after a burst of {burst}"


def test_threads_writing_at_once_keep_every_command_whole(client, js, stream):
    """Requests from several threads, direct or queued, beside a thread pipelining publish_async."""
    errors: list[BaseException] = []
    acked: list[int] = []
    lock = threading.Lock()

    def requester(n: int) -> None:
        try:
            for i in range(300):
                ack = js.publish(f"{stream.name}.t{n}", b"%d-%d" % (n, i) * 20)
                with lock:
                    acked.append(ack.seq)
        except BaseException as exc:
            errors.append(exc)

    def pipeliner() -> None:
        try:
            futures = [js.publish_async(f"{stream.name}.p", b"p" * 100) for _ in range(3000)]
            seqs = [f.result(10).seq for f in futures]
            with lock:
                acked.extend(seqs)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=requester, args=(n,)) for n in range(4)]
    threads.append(threading.Thread(target=pipeliner))
    reconnects = client._runtime.reconnects
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert sorted(acked) == list(range(1, 4 * 300 + 3000 + 1))
    assert client._runtime.reconnects == reconnects  # a torn command would have made the server drop us
    assert gate_of(client).direct_writes > 0


def test_a_direct_write_the_kernel_takes_in_part_is_finished_first(fault_proxy):
    """With the server not reading and a tiny socket buffer, a large request is sent in part: its tail goes out
    before anything written after it, and every request completes once the server reads again."""
    with jetstream_sync.connect(fault_proxy.url, timeout=10) as nc:
        js = nc.jetstream(timeout=20)
        stream = js.create_stream(StreamConfig(name="GATE", subjects=["gate.>"]))
        gate = gate_of(nc)
        assert gate.bound
        sock = gate._sock
        assert sock is not None
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        payloads = [bytes([65 + i]) * (200_000 + i) for i in range(4)]
        acks: dict[int, int] = {}
        errors: list[BaseException] = []
        fault_proxy.stall("upstream")

        def request(i: int) -> None:
            try:
                acks[i] = js.publish(f"gate.{i}", payloads[i]).seq
            except BaseException as exc:
                errors.append(exc)

        first = threading.Thread(target=request, args=(0,))
        first.start()
        wait_until(lambda: gate.partial_writes >= 1, timeout=5)
        others = [threading.Thread(target=request, args=(i,)) for i in range(1, 4)]
        for t in others:
            t.start()
        fault_proxy.resume("upstream")
        for t in [first, *others]:
            t.join(20)
        assert not errors, errors
        assert sorted(acks.values()) == [1, 2, 3, 4]
        for i, payload in enumerate(payloads):
            assert stream.get_msg(acks[i]).data == payload


def test_the_gate_binds_again_after_a_restart(nats_server_function):
    with jetstream_sync.connect(nats_server_function.url, reconnect_wait=0.1, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream(timeout=5)
        js.create_stream(StreamConfig(name="AGAIN", subjects=["again"]))
        gate = gate_of(nc)
        first_socket = gate._sock
        nats_server_function.restart()
        wait_until(lambda: nc.is_connected and gate.bound and gate._sock is not first_socket, timeout=10)
        before = gate.direct_writes
        wait_until(lambda: js.stream_info("AGAIN") is not None, timeout=10)
        assert gate.direct_writes > before


def test_the_gate_stays_shut_until_a_reconnect_has_replayed_the_subscriptions(fault_proxy):
    """nats-py marks a reconnecting client connected before it subscribes again; a request written then would
    get its reply before the reply inbox exists. The gate opens only in the reconnected callback, which comes
    after the replay: while the client has not counted the reconnect, the gate is never open."""
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.05, max_reconnect_attempts=-1) as nc:
        for i in range(2000):  # a long replay
            nc.subscribe(f"filler.{i}")
        runtime = nc._runtime
        gate = gate_of(nc)
        assert gate.bound
        reconnects = runtime.reconnects
        fault_proxy.refuse()  # held off until the test has seen the gate shut: a quick reconnect could hide it
        fault_proxy.cut()
        wait_until(lambda: not gate.bound, timeout=5)  # the lost connection is noticed
        fault_proxy.refuse(False)
        while runtime.reconnects == reconnects:
            bound = gate.bound  # read before the count: the callback counts first, then opens
            if runtime.reconnects == reconnects:
                assert not bound, "the gate opened before the reconnect was complete"
        wait_until(lambda: gate.bound, timeout=5)
        js = nc.jetstream(timeout=5)
        before = gate.direct_writes
        js.account_info()
        assert gate.direct_writes == before + 1


def test_a_request_waits_behind_bytes_the_transport_still_holds(fault_proxy):
    """With the server not reading, queued publishes back up in the asyncio transport: a request made then must
    not be written directly (it would pass them); it goes out after them once the server reads again."""
    with jetstream_sync.connect(fault_proxy.url, timeout=10) as nc:
        js = nc.jetstream(timeout=20)
        js.create_stream(StreamConfig(name="BEHIND", subjects=["behind.>"]))
        runtime = nc._runtime
        gate = gate_of(nc)
        assert gate._sock is not None
        gate._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        fault_proxy.stall("upstream")
        for _ in range(8):
            nc.publish("behind.core", b"c" * 200_000)
        writer = runtime._nc._tcp_writer()
        assert writer is not None
        wait_until(lambda: writer.transport.get_write_buffer_size() > 0, timeout=5)
        direct = gate.direct_writes
        acks: list[int] = []
        requester = threading.Thread(target=lambda: acks.append(js.publish("behind.sync", b"s").seq))
        requester.start()
        wait_until(lambda: len(runtime._mux) >= 1, timeout=5)  # the request is made
        assert gate.direct_writes == direct
        fault_proxy.resume("upstream")
        requester.join(20)
        assert acks == [9]  # stored after the 8 publishes queued before it


def test_large_publishes_cut_by_a_full_socket_arrive_whole_and_in_order(fault_proxy):
    """Core publishes of large payloads leave the IO thread by sendmsg from their own buffers
    (``SocketGate.send_burst``); with the server not reading and a tiny socket buffer the kernel takes part of a
    burst, and what it left goes through the transport: every message arrives whole, in order, on one connection."""
    with jetstream_sync.connect(fault_proxy.url, timeout=10) as nc:
        js = nc.jetstream(timeout=20)
        stream = js.create_stream(StreamConfig(name="BURST", subjects=["burst.>"]))
        gate = gate_of(nc)
        assert gate.bound and gate._sock is not None
        gate._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        payloads = [bytes([65 + i % 26]) * (20_000 + 997 * i) for i in range(60)]
        reconnects = nc._runtime.reconnects
        errors: list[BaseException] = []

        def publisher() -> None:
            try:
                for payload in payloads:  # 3 MB: blocks at the outbound queue's high water until the server reads
                    nc.publish("burst.x", payload)
            except BaseException as exc:
                errors.append(exc)

        fault_proxy.stall("upstream")
        thread = threading.Thread(target=publisher)
        thread.start()
        transport = gate._transport
        wait_until(lambda: bool(transport._buffer), timeout=10)  # the kernel left part of a burst to the transport
        fault_proxy.resume("upstream")
        thread.join(30)
        assert not errors, errors
        nc.flush(20)
        assert nc._runtime.reconnects == reconnects  # a torn command would have made the server drop us
        assert stream.info().state.messages == len(payloads)
        for seq, payload in enumerate(payloads, start=1):
            assert stream.get_msg(seq).data == payload
