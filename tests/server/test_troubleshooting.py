"""The troubleshooting guide quotes the errors users meet as they see them: each is made here against a real
nats-server, and the guide must quote its class with its message (whole where the message is the same in every
run, else its key words), so the page cannot drift from the code. Its programs run as a reader would run them."""

from __future__ import annotations

import logging
import sys
import types

import attrs
import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import REPO_ROOT, run_in_fork, run_opening_program, wait_until

GUIDE = REPO_ROOT / "docs" / "guides" / "troubleshooting.md"


def section(heading: str) -> str:
    """The text of the guide's ``## `` section whose heading starts with ``heading`` (up to the next one)."""
    text = GUIDE.read_text(encoding="utf-8")
    found = [part for part in text.split("\n## ")[1:] if part.startswith(heading)]
    assert len(found) == 1, f"the guide has no single section '## {heading}...'"
    return found[0]


def quotes(part: str, exc: BaseException) -> list[str]:
    """The lines of ``part`` that quote an error of ``exc``'s class as a traceback ends with it."""
    prefix = f"jetstream_sync.errors.{type(exc).__name__}: "
    lines = [line for line in part.splitlines() if line.startswith(prefix)]
    assert lines, f"the section does not quote {prefix!r}; the code says: {prefix}{exc}"
    return lines


def assert_quotes_exactly(part: str, exc: BaseException) -> None:
    """The section quotes ``exc`` word for word (a message that is the same in every run)."""
    line = f"jetstream_sync.errors.{type(exc).__name__}: {exc}"
    assert line in quotes(part, exc), f"the guide does not quote what the code says: {line}"


def assert_quotes_key_words(part: str, exc: BaseException, *words: str) -> None:
    """The message still says each of ``words``, and one of the section's quotes of its class says them all (a
    message with a port, an inbox or a server's own text in it)."""
    for word in words:
        assert word in str(exc), f"the code no longer says {word!r}: {exc}"
    lines = quotes(part, exc)
    assert any(all(word in line for word in words) for line in lines), f"no quote says all of {words}: {lines}"


def test_the_opening_program_prints_what_the_guide_says(tmp_path):
    result = run_opening_program(GUIDE, tmp_path, timeout=60)
    printed = GUIDE.read_text(encoding="utf-8").split("It prints:\n\n```text\n", 1)[1].split("```", 1)[0]
    assert result.stdout == printed


def test_no_servers_when_nothing_listens():
    server = EmbeddedServer(jetstream=False)  # a free port that nothing listens on: it is never started
    with pytest.raises(errors.NoServersError) as caught:
        jetstream_sync.connect(server.url)
    words = ("could not connect to", "Connect call failed", "check the URL and that nats-server runs")
    assert_quotes_key_words(section("1."), caught.value, *words)


def test_a_wrong_scheme():
    with pytest.raises(errors.InvalidServerURLError) as caught:  # before any attempt: no server is needed
        jetstream_sync.connect("http://127.0.0.1:4222")
    assert_quotes_exactly(section("2."), caught.value)


def test_refused_credentials():
    server = EmbeddedServer(jetstream=False, config="authorization { user: app, password: s3cret }")
    with server, pytest.raises(errors.AuthorizationError) as caught:
        jetstream_sync.connect(server.url, user="app", password="wrong")
    assert_quotes_exactly(section("3."), caught.value)


def test_a_subject_the_user_may_not_publish_to():
    users = '{user: app, password: s3cret, permissions: {publish: "allowed.>", subscribe: ">"}}'
    reported: list[BaseException] = []
    server = EmbeddedServer(jetstream=False, config=f"authorization {{ users = [ {users} ] }}")
    options = {"user": "app", "password": "s3cret", "error_callback": reported.append}
    with server, jetstream_sync.connect(server.url, **options) as nc:
        nc.publish("orders.new", b"order 1")
        wait_until(lambda: reported)
        assert nc.is_connected  # a refused publish is reported, the connection stays
    assert isinstance(reported[0], errors.PermissionViolationError)
    assert_quotes_exactly(section("3."), reported[0])


def test_a_server_without_jetstream():
    with EmbeddedServer(jetstream=False) as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        with pytest.raises(errors.JetStreamNotEnabledError) as caught:
            js.account_info()
        part = section("4.")
        assert_quotes_exactly(part, caught.value)
        # a publish retries within its timeout (JetStream may be starting), then says the same, not "no responders"
        with pytest.raises(errors.JetStreamNotEnabledError) as publishing:
            js.publish("a.b", b"x", timeout=1)
        assert_quotes_exactly(part, publishing.value)


def test_nobody_answers(nats_server_function):
    part = section("5.")
    with jetstream_sync.connect(nats_server_function.url) as nc:  # a server of its own: no stream takes orders.>
        with pytest.raises(errors.NoStreamResponseError) as publishing:
            nc.jetstream().publish("orders.new", b"order 1", timeout=5)
        assert_quotes_exactly(part, publishing.value)
        with pytest.raises(errors.NoRespondersError) as requesting:
            nc.request("nobody.listens.here", b"", timeout=5)
    assert_quotes_exactly(part, requesting.value)  # names the subject asked, not the reply inbox (before)


def test_a_stream_or_consumer_that_does_not_exist(nats_server_function):
    part = section("6.")
    with jetstream_sync.connect(nats_server_function.url) as nc:  # the quotes name ORDERS: a server of its own
        js = nc.jetstream()
        with pytest.raises(errors.StreamNotFoundError) as no_stream:
            js.stream("ORDERS")
        js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        with pytest.raises(errors.ConsumerNotFoundError) as no_consumer:
            js.consumer("ORDERS", "billing")
    assert_quotes_exactly(part, no_stream.value)
    assert_quotes_exactly(part, no_consumer.value)


def test_timeouts(nats_server):
    part = section("7.")
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="TROUBLESHOOTING_7", subjects=["troubleshooting.seven"]))
        try:
            worker = stream.create_or_update_consumer(ConsumerConfig(durable_name="worker"))
            with pytest.raises(errors.TimeoutError) as reading:
                worker.next(timeout=0.5)
            assert list(worker.fetch(5, expires=0.5)) == []  # an empty batch, not an error
        finally:
            js.delete_stream("TROUBLESHOOTING_7")
        nc.subscribe("prices.get")  # a responder that never answers
        with pytest.raises(errors.TimeoutError) as requesting:
            nc.request("prices.get", b"EUR", timeout=0.5)
    assert_quotes_key_words(part, reading.value, "no message from", "/worker within 0.5s")
    assert_quotes_exactly(part, requesting.value)


def test_a_redelivery_after_the_ack_wait(nats_server_function, caplog):
    caplog.set_level(logging.WARNING, logger="jetstream_sync")
    with jetstream_sync.connect(nats_server_function.url) as nc:  # the quoted warning names ORDERS/worker
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        js.publish("orders.new", b"job-1")
        retry = stream.create_or_update_consumer(ConsumerConfig(durable_name="retry", ack_wait=1.0))
        first = retry.next(timeout=5)  # not acked: the server sends it again after one second
        again = retry.next(timeout=5)
        worker = stream.create_or_update_consumer(ConsumerConfig(durable_name="worker"))
        with worker.consume(lambda msg: None):  # a handler that returns without answering: the warning
            wait_until(lambda: any("returned without acknowledging" in r.getMessage() for r in caplog.records))
    part = section("8.")
    for msg in (first, again):
        assert f"delivery {msg.metadata.num_delivered}: {msg.data.decode()}" in part.splitlines()
    assert again.metadata.sequence.stream == first.metadata.sequence.stream
    warned = next(r for r in caplog.records if "returned without acknowledging" in r.getMessage())
    assert f"WARNING jetstream_sync {warned.getMessage()}" in part.splitlines()
    assert "auto_in_progress=True" in part


def test_a_duplicate_message_id(nats_server_function):
    with jetstream_sync.connect(nats_server_function.url) as nc:  # the quoted ack names ORDERS: a server of its own
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        try:
            stored = js.publish("orders.new", b"order 1", msg_id="order-1")
            repeated = js.publish("orders.new", b"order 1 again", msg_id="order-1")
            assert js.stream_info("ORDERS").state.messages == 1
        finally:
            js.delete_stream("ORDERS")
    assert not stored.duplicate
    assert repeated.duplicate and repeated.seq == stored.seq
    assert repr(repeated) in section("9.").splitlines()


def test_a_slow_consumer(nats_server):
    reported: list[BaseException] = []
    with jetstream_sync.connect(nats_server.url, error_callback=reported.append) as nc:
        sub = nc.subscribe("events", max_pending=10)
        for _ in range(100):
            nc.publish("events", b"x")
        nc.flush(timeout=5)
        wait_until(lambda: reported)
        assert sub.dropped == 90
    assert isinstance(reported[0], errors.SlowConsumerError)
    assert_quotes_exactly(section("10."), reported[0])


def test_a_client_used_after_fork(nats_server):
    expected = str(errors.ForkedClientError())
    with jetstream_sync.connect(nats_server.url) as nc:

        def child() -> bool:
            try:
                nc.publish("after.fork", b"x")
            except errors.ForkedClientError as exc:
                return str(exc) == expected
            return False

        assert run_in_fork(child) == 0
    assert_quotes_exactly(section("10."), errors.ForkedClientError())


def test_uwsgi_without_threads(monkeypatch):
    """What uWSGI 2.0.26's Python plugin puts in ``sys.modules`` when it runs without threads (the deployment
    tests run the real uWSGI; this quotes its message)."""
    monkeypatch.setitem(sys.modules, "uwsgi", types.SimpleNamespace(has_threads=False, version=b"2.0.26"))
    with pytest.raises(errors.ThreadsDisabledError) as caught:
        jetstream_sync.connect("nats://127.0.0.1:4222")
    assert_quotes_exactly(section("10."), caught.value)


def _program_of(heading: str, tmp_path) -> str:
    """Run the program of the section ``heading`` as a reader would (its first python block); its stdout and
    stderr, joined."""
    page = tmp_path / f"{heading.split(maxsplit=1)[0].lower()}.md"
    page.write_text(section(heading), encoding="utf-8")
    result = run_opening_program(page, tmp_path, timeout=60)
    return result.stdout + result.stderr


def test_the_logging_program_logs_what_the_guide_shows(tmp_path):
    logged = _program_of("DEBUG logs", tmp_path)
    for line in (
        "INFO jetstream_sync [jetstream-sync-io] disconnected from NATS; reconnecting",
        "DEBUG jetstream_sync [jetstream-sync-io] consume LOGS/reader: reconnected, pulling again",
        "DEBUG jetstream_sync [jetstream-sync-io] consume LOGS/reader: pull batch=10 max_bytes=0",
    ):
        assert line in logged
        assert line in section("DEBUG logs")
    assert "INFO jetstream_sync [jetstream-sync-io] reconnected to nats://127.0.0.1:" in logged
    assert "Traceback" not in logged


def test_the_stats_program_prints_what_the_guide_explains(tmp_path):
    printed = _program_of("Reading", tmp_path).splitlines()
    fields = [field.name for field in attrs.fields(jetstream_sync.ConsumeStats)]
    assert [line.split()[0] for line in printed[:-1]] == fields  # one line per field, in order
    values = dict(line.split(maxsplit=1) for line in printed[:-1])
    assert values["messages_delivered"] == "100"
    assert values["buffered"] == "0"
    assert printed[-1] == "owed by the server now: 20"
    part = section("Reading")
    for name in fields:
        assert f"`{name}`" in part, f"the guide does not explain ConsumeStats.{name}"
        assert f"\n{name} " in part, f"the guide's output does not show ConsumeStats.{name}"
