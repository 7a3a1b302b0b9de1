"""One member process of the partitioned-group acceptance test (test_group_processes.py).

    python group_member_process.py URL STREAM GROUP MEMBER RECORDS_FILE [auto|fixed [MAX_ACK_PENDING]]

Joins the elastic group (with auto_membership unless ``fixed``: then the membership is the test's to edit) with
two workers keyed by subject. For each message it records
``key seq start_ns end_ns member`` (the handling interval, monotonic clock, shared by every process on the
machine) with one write(2) before acking, so a SIGKILL loses no record of a message it acked. SIGTERM leaves
the group and exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, PartitionedGroups


def main() -> int:
    url, stream, group, member, records = sys.argv[1:6]
    auto = sys.argv[6:7] != ["fixed"]
    template = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=int(sys.argv[7]) if sys.argv[7:] else None)
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s {member} %(threadName)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    fd = os.open(records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def handle(msg: jetstream_sync.Msg) -> None:
        started = time.monotonic_ns()
        time.sleep(0.0002)  # some work, so that handlings have a length to overlap with
        ended = time.monotonic_ns()
        os.write(fd, f"{msg.subject} {int(msg.data)} {started} {ended} {member}\n".encode())
        msg.ack()

    with jetstream_sync.connect(url, name=f"group-member-{member}") as nc:
        groups = PartitionedGroups(nc.jetstream())
        joined = groups.join_elastic(
            stream,
            group,
            member,
            handle,
            ack_wait=2,
            auto_membership=auto,
            consumer_config=template,
            workers=2,
            ordered_by=lambda msg: msg.subject,
        )
        print("joined", flush=True)
        while not stop.wait(0.1):
            if joined.closed.is_set():
                print(f"member ended on its own: {joined.error!r}", file=sys.stderr, flush=True)
                return 1
        joined.stop(timeout=30)
    os.close(fd)
    print("left", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
