"""SocketGate.send on its own (no server): partial sends keep their tail first, a request made from inside a
direct write (a signal handler's) is refused, and an interrupted direct write drops the connection.
SocketGate.send_burst over a real socket pair: what the kernel took and what it hands back make the burst, in
order, whether it took all of it, part of a part, or nothing."""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Callable, Iterator

import pytest

from jetstream_sync._runtime import _gate
from jetstream_sync._runtime._gate import SocketGate


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.aborted = False
        self._buffer: deque[bytes] = deque()  # what asyncio's transport keeps unsent (a deque from 3.12)

    def is_closing(self) -> bool:
        return self.aborted

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def abort(self) -> None:
        self.aborted = True


class FakeSocket:
    def __init__(self, send: Callable[[bytes], int]) -> None:
        self.send = send


def bound_gate(send: Callable[[bytes], int]) -> tuple[SocketGate, FakeTransport, list[Callable[[], None]]]:
    posted: list[Callable[[], None]] = []
    gate = SocketGate(posted.append)
    transport = FakeTransport()
    gate._transport = transport
    gate._sock = FakeSocket(send)  # type: ignore[assignment]
    return gate, transport, posted


def test_a_whole_send_counts_and_leaves_nothing_behind():
    sent: list[bytes] = []
    gate, _, posted = bound_gate(lambda data: sent.append(data) or len(data))
    with gate.lock:
        assert gate.send(b"PUB a 1\r\nx\r\n")
    assert sent == [b"PUB a 1\r\nx\r\n"]
    assert (gate.direct_writes, gate.partial_writes, posted) == (1, 0, [])


def test_a_partial_send_keeps_its_tail_and_goes_first():
    gate, transport, posted = bound_gate(lambda data: 4)
    with gate.lock:
        assert gate.send(b"PUB a 1\r\nx\r\n")
        assert not gate.send(b"PUB b 1\r\ny\r\n")  # nothing passes a tail
    assert gate.partial_writes == 1
    assert len(posted) == 1
    posted[0]()  # the IO thread's flush
    assert transport.written == [b"a 1\r\nx\r\n"]
    assert gate._tail is None


def test_nothing_is_sent_while_the_transport_holds_bytes():
    gate, transport, _ = bound_gate(lambda data: pytest.fail("must not send"))
    transport._buffer.append(b"PUB a 1\r\nx\r\n")
    with gate.lock:
        assert not gate.send(b"PUB a 0\r\n\r\n")


def test_a_request_from_inside_a_direct_write_is_refused():
    """A signal handler runs on the main thread between bytecodes, and the lock is re-entrant."""
    inner: list[bool] = []
    gate: SocketGate

    def send(data: bytes) -> int:
        inner.append(gate.send(b"PUB inner 0\r\n\r\n"))
        return len(data)

    gate, _, _ = bound_gate(send)
    with gate.lock:
        assert gate.send(b"PUB outer 0\r\n\r\n")
    assert inner == [False]
    assert gate.direct_writes == 1


def test_an_interrupted_direct_write_drops_the_connection():
    def send(data: bytes) -> int:
        raise KeyboardInterrupt  # as from a SIGINT handler, after the bytes may have gone out

    gate, transport, posted = bound_gate(send)
    with pytest.raises(KeyboardInterrupt), gate.lock:
        gate.send(b"PUB a 0\r\n\r\n")
    assert not gate.bound
    assert len(posted) == 1
    posted[0]()
    assert transport.aborted


def test_a_failing_socket_sends_nothing_and_is_left_to_the_io_thread():
    def send(data: bytes) -> int:
        raise ConnectionResetError(104, "reset")

    gate, transport, posted = bound_gate(send)
    with gate.lock:
        assert not gate.send(b"PUB a 0\r\n\r\n")
    assert gate.bound and not transport.aborted and posted == []


# -- send_burst: a large publish's parts from their own buffers ---------------------------------------------------
@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected socket pair whose writing end is non-blocking with a small buffer, as asyncio keeps it."""
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    ours.setblocking(False)
    peer.settimeout(5)
    with ours, peer:
        yield ours, peer


def burst_gate(sock: socket.socket) -> tuple[SocketGate, FakeTransport]:
    gate = SocketGate(lambda fn: pytest.fail("send_burst posts nothing"))
    transport = FakeTransport()
    gate._transport = transport
    gate._sock = sock
    return gate, transport


def received(peer: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += peer.recv(size - len(data))
    return data


def parts(count: int, size: int) -> list[bytes]:
    return [bytes([65 + i % 26]) * size for i in range(count)]


def test_a_burst_the_kernel_takes_whole_leaves_nothing(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    gate, _ = burst_gate(ours)
    burst = [b"PUB a 3\r\n", b"xyz", b"\r\n"]
    with gate.lock:
        assert gate.send_burst(burst) == []
    assert received(peer, 14) == b"PUB a 3\r\nxyz\r\n"


def test_what_a_full_socket_leaves_is_handed_back_in_order(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    gate, _ = burst_gate(ours)
    burst = parts(64, 16 * 1024 + 7)  # 1 MiB: far more than the socket takes
    with gate.lock:
        rest = gate.send_burst(burst)
    unsent = b"".join(rest)
    assert 0 < len(unsent) < 64 * (16 * 1024 + 7)
    whole = b"".join(burst)
    sent = len(whole) - len(unsent)
    assert received(peer, sent) == whole[:sent] and whole[sent:] == unsent
    assert any(isinstance(part, memoryview) for part in rest[:1]) or len(rest[0]) == len(burst[0])


def test_a_socket_that_takes_nothing_hands_back_every_part(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, _ = pair
    for chunk in (65536, 4096, 256, 1):  # fill the socket until the kernel takes not one byte more
        while True:
            try:
                ours.send(b"f" * chunk)
            except BlockingIOError:
                break
    gate, _ = burst_gate(ours)
    burst = parts(3, 5000)
    with gate.lock:
        assert gate.send_burst(burst) == burst


def test_more_parts_than_one_sendmsg_takes_go_in_several(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, peer = pair
    monkeypatch.setattr(_gate, "_IOV_MAX", 4)
    gate, _ = burst_gate(ours)
    burst = parts(10, 100)
    with gate.lock:
        assert gate.send_burst(burst) == []
    assert received(peer, 1000) == b"".join(burst)


def test_nothing_passes_a_tail_or_the_transports_buffer(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    gate, transport = burst_gate(ours)
    burst = parts(2, 5000)
    gate._tail = b"end of an earlier command"
    with gate.lock:
        assert gate.send_burst(burst) == burst
    gate._tail = None
    transport._buffer.append(b"PUB a 1\r\nx\r\n")
    with gate.lock:
        assert gate.send_burst(burst) == burst
    gate.unbind()
    with gate.lock:
        assert gate.send_burst(burst) == burst
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(1)  # none of it was sent


def test_a_broken_socket_hands_back_every_part_for_the_transport_to_report(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    peer.close()
    gate, _ = burst_gate(ours)
    burst = parts(2, 5000)
    with gate.lock:
        assert gate.send_burst(burst) == burst
