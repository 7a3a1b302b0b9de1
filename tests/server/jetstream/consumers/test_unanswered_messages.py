"""A consume whose handler returns without answering a message (no ack, nak, term or in_progress) on an
AckExplicit consumer is logged once per consume at WARNING, naming the consumer and the fix: the server would
otherwise redeliver the message after ack_wait, silently, which looks like duplicates. ``deferred_ack=True``
is the documented way for an application that acks later on another thread."""

from __future__ import annotations

import logging
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from jetstream_sync import AckPolicy, ConsumerConfig, errors
from jetstream_sync.integrations._consume import settling
from jetstream_sync.message import Msg
from tests.helpers import REPO_ROOT, wait_until

COUNT = 5


def publish(js, subject: str, n: int = COUNT) -> None:
    for i in range(n):
        js.publish(subject, b"%d" % i)


def warnings_about_unanswered(caplog) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.levelno == logging.WARNING and "returned without acknowledging" in r.getMessage()
    ]


def run(consumer, handler: Callable[[Msg], object], seen: list[Msg], n: int = COUNT, **kwargs) -> None:
    """Consume until the handler has seen ``n`` messages, then stop."""

    def record(msg: Msg) -> None:
        handler(msg)
        seen.append(msg)

    with consumer.consume(record, **kwargs):
        wait_until(lambda: len(seen) >= n, timeout=10)


@pytest.fixture
def explicit(stream):
    return stream.create_consumer(ConsumerConfig(durable_name="worker", ack_wait=30))


def test_a_handler_that_returns_without_acking_is_logged_once_with_the_fix(js, stream, explicit, caplog):
    publish(js, f"{stream.name}.a")
    seen: list[Msg] = []
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        run(explicit, lambda msg: None, seen)
    found = warnings_about_unanswered(caplog)
    assert len(found) == 1, [r.getMessage() for r in found]
    text = found[0].getMessage()
    assert f"consume {stream.name}/worker:" in text
    assert "stream sequence 1" in text
    for fix in ("msg.ack()", "msg.nak()", "msg.term()", "msg.in_progress()", "deferred_ack=True"):
        assert fix in text, text
    assert not any(msg.is_acked for msg in seen)


def test_each_consume_says_it_once(js, stream, explicit, caplog):
    publish(js, f"{stream.name}.a")
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        run(explicit, lambda msg: None, [], workers=3)
        assert len(warnings_about_unanswered(caplog)) == 1
        publish(js, f"{stream.name}.a")  # new ones: those handed out stay pending for ack_wait
        run(explicit, lambda msg: None, [])
    assert len(warnings_about_unanswered(caplog)) == 2


@pytest.mark.parametrize(
    "answer",
    [Msg.ack, Msg.nak, Msg.term, Msg.in_progress, lambda msg: msg.ack_sync(), settling(lambda msg: None)],
    ids=["ack", "nak", "term", "in_progress", "ack_sync", "the commands' settling wrapper"],
)
def test_a_handler_that_answers_is_not_logged(js, stream, explicit, caplog, answer):
    publish(js, f"{stream.name}.a")
    seen: list[Msg] = []
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        run(explicit, answer, seen)
    assert warnings_about_unanswered(caplog) == []


def test_a_handler_that_raises_is_reported_as_such_not_as_unanswered(js, stream, explicit, caplog):
    publish(js, f"{stream.name}.a")
    reported: list[BaseException] = []
    seen: list[Msg] = []

    def fail(msg: Msg) -> None:
        seen.append(msg)
        raise LookupError("handler bug")

    with (
        caplog.at_level(logging.WARNING, logger="jetstream_sync"),
        explicit.consume(fail, error_handler=reported.append),
    ):
        wait_until(lambda: len(reported) >= COUNT, timeout=10)
    assert all(isinstance(exc, LookupError) for exc in reported)
    assert warnings_about_unanswered(caplog) == []


def test_deferred_ack_silences_it_for_acks_made_later_on_another_thread(js, stream, explicit, caplog):
    publish(js, f"{stream.name}.a")
    later: queue.Queue[Msg] = queue.Queue()

    def acker() -> None:
        for _ in range(COUNT):
            later.get(timeout=10).ack()

    thread = threading.Thread(target=acker, name="acks-later")
    thread.start()
    seen: list[Msg] = []
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        run(explicit, later.put, seen, deferred_ack=True)
    thread.join(10)
    assert warnings_about_unanswered(caplog) == []
    wait_until(lambda: explicit.info().num_ack_pending == 0, timeout=10)
    assert explicit.info().num_redelivered == 0


@pytest.mark.parametrize("policy", [AckPolicy.NONE, AckPolicy.ALL])
def test_other_ack_policies_are_not_checked(js, stream, caplog, policy):
    consumer = stream.create_consumer(ConsumerConfig(durable_name=f"p-{policy.value}", ack_policy=policy))
    publish(js, f"{stream.name}.a")
    seen: list[Msg] = []
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        run(consumer, lambda msg: None, seen)
    assert warnings_about_unanswered(caplog) == []


def test_a_push_consumer_is_checked_too(js, stream, caplog):
    consumer = stream.create_push_consumer(
        ConsumerConfig(durable_name="pushed", deliver_subject=f"deliver.{stream.name}", ack_wait=30)
    )
    publish(js, f"{stream.name}.a")
    seen: list[Msg] = []
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        run(consumer, lambda msg: None, seen)
    found = warnings_about_unanswered(caplog)
    assert len(found) == 1 and f"consume {stream.name}/pushed" in found[0].getMessage()


def test_deferred_ack_must_be_a_bool(explicit):
    with pytest.raises(errors.InvalidTypeError, match="deferred_ack"):
        explicit.consume(lambda msg: None, deferred_ack="yes")


def test_the_consuming_guides_deferred_ack_program_runs_as_it_stands(tmp_path):
    """The program of the Consuming guide's "Who acks, and when", run as a reader would."""
    text = (REPO_ROOT / "docs" / "guides" / "consuming.md").read_text(encoding="utf-8")
    section = text[text.index("## Who acks, and when") :]
    program = tmp_path / "deferred_ack.py"
    program.write_text(re.search(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL).group(1))
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["done: job 0", "done: job 1", "done: job 2", "pending acks: 0"]
    assert "returned without acknowledging" not in result.stderr
