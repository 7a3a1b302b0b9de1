#!/usr/bin/env python3
"""The protocol parser alone, on both paths: the pure-Python parser and the compiled fast path (``_cscan.c``).

Usage (from the repository root, in the dev virtualenv): ``python benchmarks/parser.py [--rounds 7]``

A stream of JetStream deliveries as a pull consumer receives them (``MSG <subject> <sid> $JS.ACK... <size>``,
128 B and 16 KiB payloads) is cut into 64 KiB reads, as the socket hands them over, and parsed by one
`ProtocolParser` whose connection has a fast handler for the subscription. Three handlers: one that does
nothing (the parser's own cost), one that builds the `Msg` the consumer would hand out (what the IO thread
does per message before the hand-off to a buffer), and the same work as a consume does it: on the compiled path
through the delivery sink (``_csink.c``: the `Msg` built in C, a list of them per read), on the pure-Python
path as the row before. Both paths run in this process, interleaved, best of
several rounds; the figures are CPU time of this thread (``time.thread_time``), so a loaded machine changes
them less than wall time. Prints ns per message and MB/s of wire bytes, and the compiled/pure ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

from jetstream_sync._delivery._target import PullTarget, pulled_message
from jetstream_sync._protocol import ACK_PREFIX
from jetstream_sync._runtime import _scan
from jetstream_sync._runtime._parser import ProtocolParser
from jetstream_sync.message import Msg

READ = 64 * 1024
SID = 7


class Connection:
    """What the parser reads of its connection: the fast handlers, the counters, the limits."""

    def __init__(self, handler: Callable[[bytes, bytes, bytes, bytes | None], object]) -> None:
        self.fast_handlers = {SID: handler}
        self.stats = {"in_msgs": 0, "in_bytes": 0}
        self._max_payload = 1024 * 1024
        self.reply_prefix = b"_INBOX."

    async def _error_cb(self, exc: BaseException) -> None:
        raise AssertionError(f"the benchmark's stream is valid: {exc}")


def stream(size: int, count: int) -> list[bytes]:
    """``count`` deliveries of ``size`` bytes, cut into reads of READ bytes."""
    payload = b"x" * size
    wire = b"".join(
        b"MSG bench.orders.%d %d $JS.ACK.BENCH.C.1.%d.%d.1700000000000000000.%d %d\r\n%s\r\n"
        % (i % 10, SID, i + 1, i + 1, count - i - 1, size, payload)
        for i in range(count)
    )
    return [wire[at : at + READ] for at in range(0, len(wire), READ)]


def parse_all(chunks: list[bytes], handler: Callable[..., object], count: int) -> float:
    """CPU seconds of this thread to parse ``chunks``; checks that all ``count`` messages reached the handler."""
    connection = Connection(handler)
    parser = ProtocolParser(connection)

    async def run() -> float:
        started = time.thread_time()
        for chunk in chunks:
            await parser.parse(chunk)
        return time.thread_time() - started

    seconds = asyncio.run(run())
    if connection.stats["in_msgs"] != count:
        sys.exit(f"the handler got {connection.stats['in_msgs']} of {count} messages")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds per path and case (best is kept)")
    args = parser.parse_args()
    compiled = _scan.scan
    if compiled is None:
        sys.exit(f"the compiled parser is not in use here ({_scan.PARSER}): nothing to compare")

    target = PullTarget("BENCH", "C", b"$JS.API.CONSUMER.MSG.NEXT.BENCH.C", ack_none=False)

    def build(subject: bytes, reply: bytes, payload: bytes, headers: bytes | None) -> Msg:
        return pulled_message(None, target, subject, reply, payload, headers)  # type: ignore[arg-type]  # no acks

    sink = _scan.DeliverySink(Msg, build, lambda msgs, size: None, None, False, ACK_PREFIX, True)
    # each case: (the pure-Python path's handler, the compiled path's)
    handlers: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
        "parse only": (lambda subject, reply, payload, headers: None,) * 2,
        "parse + Msg": (build, build),
        "parse + Msg, as a consume (sink)": (build, sink),
    }
    print(f"# {platform.python_implementation()} {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    print("| payload | handler | pure ns/msg | compiled ns/msg | pure MB/s | compiled MB/s | compiled/pure time |")
    print("|---|---|---|---|---|---|---|")
    for size, count in ((128, 200_000), (16 * 1024, 20_000)):
        chunks = stream(size, count)
        wire_bytes = sum(map(len, chunks))
        for label, (pure_handler, compiled_handler) in handlers.items():
            best = {"python": float("inf"), "compiled": float("inf")}
            for _ in range(args.rounds):
                for path, scan, handler in (("python", None, pure_handler), ("compiled", compiled, compiled_handler)):
                    _scan.scan = scan
                    best[path] = min(best[path], parse_all(chunks, handler, count))
            _scan.scan = compiled
            ns = {path: seconds / count * 1e9 for path, seconds in best.items()}
            mbs = {path: wire_bytes / seconds / 1e6 for path, seconds in best.items()}
            print(
                f"| {size} B | {label} | {ns['python']:.0f} | {ns['compiled']:.0f} | {mbs['python']:.0f} "
                f"| {mbs['compiled']:.0f} | {best['compiled'] / best['python']:.2f} |"
            )
    print("checked: every message of every round reached the handler, on both paths")


if __name__ == "__main__":
    main()
