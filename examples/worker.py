"""A work-queue worker: consume() jobs with a handler thread, stop cleanly (drain) on Ctrl-C or SIGTERM.

python examples/worker.py                          # embedded server, publishes demo jobs, runs 3 s
python examples/worker.py nats://127.0.0.1:4222    # your server; runs until Ctrl-C

The demo publishes 20 good jobs and one poison job (``poison-1``), which the handler terminates with a WARNING
saying what it received and why: a job that can never succeed is taken out of the queue at once rather than
retried ``max_deliver`` times.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, Msg, RetentionPolicy, StreamConfig
from jetstream_sync.testing import ServerNotInstalledError

log = logging.getLogger("worker")


def handle(msg: Msg) -> None:
    """Do the job; ack when done, nak with a delay to retry later, term a job that can never succeed."""
    job = msg.data.decode()
    if job.startswith("poison"):
        # A job that fails however often it is retried: term() ends its deliveries now instead of after
        # max_deliver attempts; the server publishes a MSG_TERMINATED advisory with the reason, where a
        # dead-letter consumer can pick it up (docs/guides/advisories.md).
        log.warning(
            "terminating %r (stream seq %d, delivery %d): unprocessable job, retrying cannot help; the server will"
            " not redeliver it and announces it on $JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.JOBS.workers",
            job,
            msg.metadata.sequence.stream,
            msg.metadata.num_delivered,
        )
        msg.term(reason="unprocessable job")
        return
    log.info("done %s (delivery %d)", job, msg.metadata.num_delivered)
    msg.ack()


def run(url: str, demo: bool) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with jetstream_sync.connect(url, name="worker", max_reconnect_attempts=-1) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(StreamConfig(name="JOBS", subjects=["jobs.>"], retention=RetentionPolicy.WORK_QUEUE))
        cons = js.create_or_update_consumer(
            "JOBS", ConsumerConfig(durable_name="workers", ack_policy=AckPolicy.EXPLICIT, ack_wait=30, max_deliver=5)
        )
        if demo:
            for i in range(20):
                js.publish("jobs.resize", f"job-{i}".encode(), msg_id=f"job-{i}")
            js.publish("jobs.resize", b"poison-1", msg_id="poison-1")
            threading.Timer(3.0, stop.set).start()
        ctx = cons.consume(handle, error_handler=lambda exc: log.warning("consume: %s", exc), max_messages=100)
        log.info("worker running; Ctrl-C to stop")
        stop.wait()
        log.info("draining: finishing buffered jobs, pulling no more")
        ctx.drain()
        ctx.wait(timeout=30)
        log.info("stopped cleanly after %d jobs", ctx.stats().messages_delivered)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
    if len(sys.argv) > 1:
        run(sys.argv[1], demo=False)
        return
    from jetstream_sync.testing import EmbeddedServer

    with EmbeddedServer() as server:
        run(server.url, demo=True)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(f"{exc}; or give a running server: python examples/worker.py nats://127.0.0.1:4222")
