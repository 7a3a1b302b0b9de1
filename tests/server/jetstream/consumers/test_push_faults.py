"""Push consumers against faults only a proxy can make: one frame lost on a connection that stays up.

A flow-control reply dropped on its way to the server stalls the consumer until the client answers the
``Nats-Consumer-Stalled`` header of the next heartbeat (ADR-15 "Flow Control"); a message dropped on its way to
the client is a gap in the consumer sequence, reported for a plain push consumer and healed by a reset for an
ordered one (ADR-15 "Messages Gaps"). The FaultProxy drops exactly one chosen NATS frame (``drop_next``) and
watches what crosses it (``watch``), so each test can tell how the recovery happened, not only that it did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig, errors
from jetstream_sync.testing import EmbeddedServer, Frame
from tests.helpers import wait_until

STALLED = "Nats-Consumer-Stalled"


class Collector:
    """A handler recording stream sequences (and acking); read from the test thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seqs: list[int] = []

    def __call__(self, msg: jetstream_sync.Msg) -> None:
        with self.lock:
            self.seqs.append(msg.metadata.sequence.stream)
        msg.ack()

    def __len__(self) -> int:
        with self.lock:
            return len(self.seqs)

    def snapshot(self) -> list[int]:
        with self.lock:
            return list(self.seqs)


def fill(server: EmbeddedServer, stream: str, count: int, size: int = 0) -> None:
    """Create the stream and store ``count`` messages over a direct connection (not through the proxy)."""
    with jetstream_sync.connect(server.url) as direct:
        js = direct.jetstream()
        js.create_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
        for i in range(count):
            js.publish_async(f"{stream}.x", b"x" * size if size else b"%d" % i)
        js.publish_async_complete(timeout=10)


def wait_delivered(count: Callable[[], int], total: int, timeout: float, state: Callable[[], object]) -> None:
    """Wait until ``total`` messages were handed out; on failure say how far it got and what the consumer saw."""
    try:
        wait_until(lambda: count() >= total, timeout=timeout)
    except AssertionError:
        raise AssertionError(f"{count()}/{total} messages delivered within {timeout}s; {state()}") from None


def is_stalled_heartbeat(frame: Frame) -> bool:
    return frame.is_message and frame.reply is None and STALLED.encode() in frame.headers


def stalled_subjects(frames: list[Frame]) -> set[str]:
    """The flow-control subjects that heartbeats named in their ``Nats-Consumer-Stalled`` header."""
    found = set()
    for frame in frames:
        for line in frame.headers.decode().split("\r\n"):
            key, _, value = line.partition(":")
            if key.strip() == STALLED:
                found.add(value.strip())
    return found


# -- flow control -------------------------------------------------------------------------------------------------

FC_MESSAGES = 3000  # x 8 KiB: the server asks for flow control every 1-2 MiB, so several times
FC_SIZE = 8 * 1024


def test_dropped_flow_control_reply_is_recovered_through_the_stalled_header(nats_server_function, fault_proxy):
    fill(nats_server_function, "FC", FC_MESSAGES, FC_SIZE)
    with jetstream_sync.connect(fault_proxy.url) as nc:
        stream = nc.jetstream().stream("FC")
        dropped = fault_proxy.drop_next("upstream", "$JS.FC.>")
        with (
            fault_proxy.watch("upstream", "$JS.FC.>") as replies,
            fault_proxy.watch("downstream", is_stalled_heartbeat) as stalled,
        ):
            pc = stream.create_or_update_push_consumer(
                ConsumerConfig(
                    durable_name="fc",
                    deliver_subject="_deliver.fc",
                    flow_control=True,
                    idle_heartbeat=0.5,
                    max_ack_pending=FC_MESSAGES * 2,
                )
            )
            got = Collector()
            errs: list[BaseException] = []
            ctx = pc.consume(got, error_handler=errs.append)
            try:
                assert dropped.wait(timeout=5), "the server never asked for flow control"
                wait_delivered(
                    got.__len__,
                    FC_MESSAGES,
                    timeout=10,
                    state=lambda: (
                        f"stats {ctx.stats()}, stalled heartbeats {len(stalled.frames)}, "
                        f"FC replies forwarded {[f.subject for f in replies.frames]}, errors {errs}"
                    ),
                )
                wait_until(lambda: pc.info().num_ack_pending == 0)
            finally:
                ctx.stop()
            stats = ctx.stats()
    lost = dropped.frames[0]
    assert lost.verb == "PUB" and lost.subject is not None and lost.subject.startswith("$JS.FC.")
    assert lost.data == b"" and lost.reply is None
    # The server went on waiting for that reply and said so in its heartbeats; the client answered the header:
    # the only way the same subject crosses the proxy again, its first answer being the one dropped.
    assert lost.subject in stalled_subjects(stalled.frames)
    assert lost.subject in [f.subject for f in replies.frames]
    assert stats.flow_control_answered >= 2  # the dropped answer and the one to the stalled header, at least
    assert got.snapshot() == list(range(1, FC_MESSAGES + 1))  # every message once, in stream order
    assert stats.messages_delivered == FC_MESSAGES
    assert stats.gaps == stats.dropped == 0
    assert errs == []


def test_ordered_push_recovers_a_dropped_flow_control_reply_without_a_reset(nats_server_function, fault_proxy):
    fill(nats_server_function, "OFC", FC_MESSAGES, FC_SIZE)
    with jetstream_sync.connect(fault_proxy.url) as nc:
        opc = nc.jetstream().ordered_push_consumer("OFC", idle_heartbeat=0.5)
        dropped = fault_proxy.drop_next("upstream", "$JS.FC.>")
        with fault_proxy.watch("upstream", "$JS.FC.>") as replies:
            got = Collector()
            errs: list[BaseException] = []
            ctx = opc.consume(got, error_handler=errs.append)
            try:
                assert dropped.wait(timeout=5), "the server never asked for flow control"
                wait_delivered(got.__len__, FC_MESSAGES, timeout=10, state=lambda: f"stats {ctx.stats()}, {errs}")
            finally:
                ctx.stop()
            stats = ctx.stats()
    assert dropped.frames[0].subject in [f.subject for f in replies.frames]
    assert got.snapshot() == list(range(1, FC_MESSAGES + 1))
    assert stats.resets == 0 and not stats.reset_reasons, stats  # healed by the stalled answer, no new link
    assert errs == []


# -- gap detection ------------------------------------------------------------------------------------------------


def test_dropped_message_is_reported_as_a_sequence_gap_and_redelivered(nats_server_function, fault_proxy):
    fill(nats_server_function, "GAP", 20)
    with jetstream_sync.connect(fault_proxy.url) as nc:
        stream = nc.jetstream().stream("GAP")
        pc = stream.create_or_update_push_consumer(
            ConsumerConfig(
                durable_name="gap", deliver_subject="_deliver.gap", ack_policy=AckPolicy.EXPLICIT, ack_wait=1
            )
        )
        # The 5th delivery. A pushed message keeps its stream subject (GAP.x) on the wire, whatever the deliver
        # subject; what marks it as this consumer's is its ack reply subject.
        dropped = fault_proxy.drop_next("downstream", reply="$JS.ACK.GAP.gap.>", skip=4)
        got = Collector()
        errs: list[BaseException] = []
        ctx = pc.consume(got, error_handler=errs.append)
        try:
            wait_until(lambda: any(isinstance(e, errors.ConsumerSequenceGapError) for e in errs))
            # explicit acks: the lost message comes again after ack_wait, as a new delivery
            wait_delivered(got.__len__, 20, timeout=5, state=lambda: f"stats {ctx.stats()}, {errs}")
            wait_until(lambda: pc.info().num_ack_pending == 0)
        finally:
            ctx.stop()
        stats = ctx.stats()
    assert dropped.wait(timeout=0)
    lost = dropped.frames[0]
    assert (lost.subject, lost.data) == ("GAP.x", b"4")  # stream sequence 5, consumer sequence 5
    (gap,) = errs
    assert isinstance(gap, errors.ConsumerSequenceGapError)
    assert (gap.expected, gap.received) == (5, 6)
    assert "GAP/gap" in str(gap) and "1 message(s) missing" in str(gap)
    assert stats.gaps == 1
    seqs = got.snapshot()
    assert seqs == [s for s in range(1, 21) if s != 5] + [5]  # the lost one last, once


def test_dropped_last_message_is_a_gap_reported_by_the_next_heartbeat(nats_server_function, fault_proxy):
    fill(nats_server_function, "TAIL", 10)
    with jetstream_sync.connect(fault_proxy.url) as nc:
        stream = nc.jetstream().stream("TAIL")
        pc = stream.create_or_update_push_consumer(
            ConsumerConfig(durable_name="tail", deliver_subject="_deliver.tail", idle_heartbeat=0.5)
        )
        dropped = fault_proxy.drop_next("downstream", reply="$JS.ACK.TAIL.tail.>", skip=9)  # the last: none follows
        got = Collector()
        errs: list[BaseException] = []
        ctx = pc.consume(got, error_handler=errs.append)
        try:
            assert dropped.wait()
            wait_until(lambda: any(isinstance(e, errors.ConsumerSequenceGapError) for e in errs), timeout=3)
        finally:
            ctx.stop()
        stats = ctx.stats()
    (gap,) = errs
    assert isinstance(gap, errors.ConsumerSequenceGapError)
    assert gap.expected == 10 and gap.received - gap.expected == 1  # the heartbeat said 10 were delivered, we saw 9
    assert stats.gaps == 1
    assert got.snapshot() == list(range(1, 10))


@pytest.mark.parametrize(
    ("lost", "seen_by"),
    [(100, "the next message"), (500, "the next heartbeat")],
    ids=["mid-stream", "last"],
)
def test_ordered_push_resets_after_a_dropped_message(nats_server_function, fault_proxy, lost, seen_by):
    total = 500
    fill(nats_server_function, "OGAP", total)
    with jetstream_sync.connect(fault_proxy.url) as nc:
        opc = nc.jetstream().ordered_push_consumer("OGAP", idle_heartbeat=0.5)
        # the lost-th message of the first link (any link's: the consumer name changes with each reset)
        dropped = fault_proxy.drop_next("downstream", reply="$JS.ACK.OGAP.>", skip=lost - 1)
        errs: list[BaseException] = []
        seqs: list[int] = []
        with opc.messages(error_handler=errs.append) as it:
            while len(seqs) < total:
                seqs.append(it.next(timeout=5).metadata.sequence.stream)
            # A reset is counted once the new link's create call returned, and that link may deliver first.
            wait_until(lambda: it.stats().resets >= 1, timeout=3)
            stats = it.stats()
    assert dropped.wait(timeout=0)
    assert dropped.frames[0].data == b"%d" % (lost - 1), seen_by
    assert seqs == list(range(1, total + 1))  # no gap and no duplicate across the reset
    assert stats.reset_reasons.get("gap", 0) >= 1, stats
    assert not [e for e in errs if isinstance(e, errors.ConsumerSequenceGapError)]  # healed, not reported
