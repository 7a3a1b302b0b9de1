"""A program that configured no logging still hears about failures (WARNING and above on stderr, Python's default).

Before, the package put a NullHandler on its logger, which swallowed them: a consume handler that raised on every
message printed nothing at all, and the program just waited. A handler's exception is logged with its traceback,
so the failing line shows; the library's own statuses stay one line.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import threading
    import jetstream_sync
    from jetstream_sync import ConsumerConfig, StreamConfig
    from jetstream_sync.testing import EmbeddedServer

    with EmbeddedServer() as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        consumer = stream.create_consumer(ConsumerConfig(durable_name="billing", max_deliver=1))
        js.publish("orders.1", b"one")
        done = threading.Event()

        def handle(msg):
            done.set()
            return msg.seq  # a typo: Msg has no attribute seq

        with consumer.consume(handle):
            done.wait(10)
    print("finished")
    """
)


def test_a_handlers_exception_reaches_stderr_with_its_line_when_logging_is_not_configured(tmp_path):
    program = tmp_path / "typo.py"
    program.write_text(PROGRAM)
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "finished\n"
    assert "consume ORDERS/billing: 'Msg' object has no attribute 'seq'" in result.stderr
    assert "Traceback (most recent call last)" in result.stderr
    assert "return msg.seq" in result.stderr  # the failing line of the handler
