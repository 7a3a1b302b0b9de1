"""A blocking call made on a thread that runs an asyncio event loop (an async view calling the client directly)
stalls the loop without an error anywhere: the client says so once per process, and names the way out."""

from __future__ import annotations

import asyncio
import logging

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig
from jetstream_sync._runtime import _wait

HINT = "called on a thread that runs an asyncio event loop"


@pytest.fixture
def fresh_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wait, "_warned_in_loop", False)  # once per process: this test's process has not warned


def hints(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "jetstream_sync" and HINT in r.getMessage()]


def test_a_blocking_call_inside_a_running_loop_is_pointed_at_sync_to_async_once(nats_server, fresh_hint, caplog):
    caplog.set_level(logging.WARNING, logger="jetstream_sync")
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(StreamConfig(name="LOOPED", subjects=["looped.>"]))

        async def async_view() -> None:
            js.publish("looped.a", b"from an async view")  # blocks the loop: it works, and is reported
            nc.flush()
            js.publish("looped.a", b"again")

        asyncio.run(async_view())
        assert js.stream_info("LOOPED").state.messages >= 2
    [record] = hints(caplog)
    assert "sync_to_async" in record.getMessage() and "publish to 'looped.a'" in record.getMessage()


def test_the_same_calls_on_a_plain_thread_or_through_to_thread_say_nothing(nats_server, fresh_hint, caplog):
    caplog.set_level(logging.WARNING, logger="jetstream_sync")
    with jetstream_sync.connect(nats_server.url) as nc:
        nc.flush()

        async def async_view() -> None:
            await asyncio.to_thread(nc.flush)  # the way the hint asks for

        asyncio.run(async_view())
    assert hints(caplog) == []
