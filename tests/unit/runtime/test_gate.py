"""SocketGate.send on its own (no server): partial sends keep their tail first, a request made from inside a
direct write (a signal handler's) is refused, and an interrupted direct write drops the connection."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import pytest

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
