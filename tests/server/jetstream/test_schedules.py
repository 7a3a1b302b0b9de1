"""Message schedules (ADR-51) against the server: the stream publishes the copies, when told, where told."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import nats
import pytest

from jetstream_sync import Schedule, StreamConfig, errors
from tests.helpers import wait_until


@pytest.fixture
def sched(js, name):
    return js.create_stream(
        StreamConfig(
            name=name,
            subjects=[f"{name}.sched.>", f"{name}.jobs.>"],
            allow_msg_schedules=True,
            allow_msg_ttl=True,
        )
    )


def _count(stream, subject: str) -> int:
    """How many messages the stream holds on ``subject``."""
    info = stream.jetstream.api.request(f"STREAM.INFO.{stream.name}", {"subjects_filter": subject})
    return int((info["state"].get("subjects") or {}).get(subject, 0))


def test_at_fires_once_and_removes_the_schedule(js, name, sched):
    when = datetime.now(timezone.utc) + timedelta(seconds=1)
    js.publish(
        f"{name}.sched.once",
        b"run me",
        headers={"Job": "42"},
        schedule=Schedule.at(when, target=f"{name}.jobs.run"),
    )
    wait_until(lambda: _count(sched, f"{name}.jobs.run") == 1, timeout=10)
    produced = sched.get_last_msg(f"{name}.jobs.run")
    assert produced.data == b"run me" and produced.headers["Job"] == "42"
    assert produced.headers["Nats-Scheduler"] == f"{name}.sched.once"
    assert produced.headers["Nats-Schedule-Next"] == "purge"
    assert produced.time >= when - timedelta(milliseconds=50)
    wait_until(lambda: _count(sched, f"{name}.sched.once") == 0, timeout=5)  # the schedule is gone


def test_every_repeats_until_cancelled(js, name, sched):
    js.publish(f"{name}.sched.tick", b"tick", schedule=Schedule.every(1, target=f"{name}.jobs.tick", ttl=60))
    wait_until(lambda: _count(sched, f"{name}.jobs.tick") >= 2, timeout=10)
    assert sched.get_last_msg(f"{name}.jobs.tick").headers["Nats-TTL"] == "60000ms"
    assert js.cancel_schedule(f"{name}.sched.tick") is True
    fired = _count(sched, f"{name}.jobs.tick")
    with pytest.raises(AssertionError):  # nothing more comes: a fire was due every second
        wait_until(lambda: _count(sched, f"{name}.jobs.tick") > fired + 1, timeout=2.5)
    assert js.cancel_schedule(f"{name}.sched.tick") is False


def test_cron_in_a_time_zone(js, name, sched):
    js.publish(
        f"{name}.sched.cron",
        b"",
        schedule=Schedule.cron("*/1 * * * * *", target=f"{name}.jobs.cron", time_zone="Europe/Amsterdam"),
    )
    wait_until(lambda: _count(sched, f"{name}.jobs.cron") >= 1, timeout=10)
    js.cancel_schedule(f"{name}.sched.cron", stream=name)
    next_fire = sched.get_last_msg(f"{name}.jobs.cron").headers["Nats-Schedule-Next"]
    assert next_fire.endswith(("+01:00", "+02:00"))  # the zone's offset, not UTC


def test_a_new_schedule_on_a_subject_replaces_the_old(js, name, sched):
    far = datetime.now(timezone.utc) + timedelta(hours=1)
    js.publish(f"{name}.sched.x", b"old", schedule=Schedule.at(far, target=f"{name}.jobs.old"))
    js.publish(f"{name}.sched.x", b"new", schedule=Schedule.every(1, target=f"{name}.jobs.new"))
    assert _count(sched, f"{name}.sched.x") == 1
    wait_until(lambda: _count(sched, f"{name}.jobs.new") >= 1, timeout=10)
    js.cancel_schedule(f"{name}.sched.x")


def test_what_only_the_stream_knows_comes_back_typed(js, name, sched):
    with pytest.raises(errors.MessageScheduleError) as info:  # a target outside the stream
        js.publish(f"{name}.sched.a", b"", schedule=Schedule.every(5, target="elsewhere.run"))
    assert info.value.err_code == 10190
    js.create_stream(StreamConfig(name=f"{name}_PLAIN", subjects=[f"{name}.plain.>"]))
    with pytest.raises(errors.MessageScheduleError) as info:
        js.publish(f"{name}.plain.a", b"", schedule=Schedule.every(5, target=f"{name}.plain.b"))
    assert info.value.err_code == 10188  # the stream does not allow schedules
    with pytest.raises(errors.InvalidArgumentError, match="own subject"):
        js.publish(f"{name}.sched.a", b"", schedule=Schedule.every(5, target=f"{name}.sched.a"))
    with pytest.raises(errors.InvalidTypeError, match="Schedule"):
        js.publish(f"{name}.sched.a", b"", schedule="@every 5s")
    assert sched.info().state.messages == 0


def test_an_older_server_is_refused_before_sending(js, name, sched, monkeypatch):
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.12.3"})
    with pytest.raises(errors.FeatureNotSupportedError, match=r"2\.14"):
        js.publish(f"{name}.sched.a", b"", schedule=Schedule.every(5, target=f"{name}.jobs.a"))
    far = datetime.now(timezone.utc) + timedelta(hours=1)
    js.publish(f"{name}.sched.a", b"", schedule=Schedule.at(far, target=f"{name}.jobs.a"))  # @at is 2.12
    assert sched.info().state.messages == 1


def test_a_schedule_from_nats_py_fires_and_ours_reads_it(nats_server, js, name, sched):
    async def schedule() -> None:
        nc = await nats.connect(nats_server.url)
        try:
            await nc.jetstream().publish(
                f"{name}.sched.py",
                b"from python",
                headers={"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": f"{name}.jobs.py"},
            )
        finally:
            await nc.close()

    asyncio.run(schedule())
    wait_until(lambda: _count(sched, f"{name}.jobs.py") >= 1, timeout=10)
    js.cancel_schedule(f"{name}.sched.py")
    assert sched.get_last_msg(f"{name}.jobs.py").data == b"from python"
