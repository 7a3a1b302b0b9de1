"""Schedule (ADR-51): the headers each form builds, and what is refused before anything is sent."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from jetstream_sync import PublishOptions, Schedule, errors


def test_at_is_sent_in_utc():
    when = datetime(2026, 12, 1, 9, 30, tzinfo=timezone(timedelta(hours=1)))
    assert Schedule.at(when, target="jobs.run").headers() == [
        (b"Nats-Schedule", b"@at 2026-12-01T08:30:00Z"),
        (b"Nats-Schedule-Target", b"jobs.run"),
    ]
    assert Schedule.at(when, target="jobs.run").needs == (2, 12, 0)


@pytest.mark.parametrize(
    ("interval", "pattern"),
    [(1, "@every 1s"), (90, "@every 90s"), (timedelta(hours=1), "@every 3600s"), (1.5, "@every 1500ms")],
)
def test_every_is_a_go_duration(interval, pattern):
    schedule = Schedule.every(interval, target="t.x")
    assert schedule.pattern == pattern and schedule.needs == (2, 14, 0)


@pytest.mark.parametrize(
    ("expression", "pattern"),
    [
        ("0 0 * * *", "0 0 0 * * *"),  # the usual five fields run at second 0
        ("*/5 * * * * *", "*/5 * * * * *"),
        ("0 30 9 * JAN-MAR mon-fri", "0 30 9 * JAN-MAR mon-fri"),
        ("0  0   9 ? * *", "0 0 9 ? * *"),
        ("@Daily", "@daily"),
        ("1,2,3 4-6/2 * * * 0", "1,2,3 4-6/2 * * * 0"),
    ],
)
def test_cron_takes_five_or_six_fields_and_names(expression, pattern):
    assert Schedule.cron(expression, target="t.x").pattern == pattern


def test_every_option_becomes_a_header():
    schedule = Schedule.cron(
        "0 0 * * *", target="reports.daily", time_zone="Europe/Amsterdam", ttl=60, source="reports.src", rollup=True
    )
    assert schedule.headers() == [
        (b"Nats-Schedule", b"0 0 0 * * *"),
        (b"Nats-Schedule-Target", b"reports.daily"),
        (b"Nats-Schedule-TTL", b"60000ms"),
        (b"Nats-Schedule-Time-Zone", b"Europe/Amsterdam"),
        (b"Nats-Schedule-Source", b"reports.src"),
        (b"Nats-Schedule-Rollup", b"sub"),
    ]
    assert (b"Nats-Schedule-TTL", b"never") in Schedule.every(5, target="t.x", ttl="never").headers()
    assert PublishOptions(schedule=schedule, msg_id="m").headers()[-1] == (b"Nats-Schedule-Rollup", b"sub")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Schedule.cron("* * * *", target="t.x"), "cron"),
        (lambda: Schedule.cron("60 * * * * *", target="t.x"), "cron"),
        (lambda: Schedule.cron("0 0 25 * * *", target="t.x"), "cron"),
        (lambda: Schedule.cron("0 0 0 * FOO *", target="t.x"), "cron"),
        (lambda: Schedule.cron("0 0 5-2 * * *", target="t.x"), "cron"),
        (lambda: Schedule.cron("0 0 */0 * * *", target="t.x"), "cron"),
        (lambda: Schedule.cron("@reboot", target="t.x"), "cron"),
        (lambda: Schedule.cron("@every 5s", target="t.x"), "cron"),
        (lambda: Schedule.cron("0 0 * * *", target="t.x", time_zone="Mars/Olympus"), "time_zone"),
        (lambda: Schedule.every(0.5, target="t.x"), "interval"),
        (lambda: Schedule.at(datetime(2026, 1, 1), target="t.x"), "when"),
        (lambda: Schedule.at(datetime.now(timezone.utc), target="t.*"), "target"),
        (lambda: Schedule.every(5, target="t.x", ttl=0.5), "ttl"),
        (lambda: Schedule.every(5, target="t.x", source="t.x"), "source"),
        (lambda: Schedule(pattern="@every 5s", target="t.x", time_zone="UTC"), "time_zone"),
        (lambda: Schedule(pattern="@every 500ms", target="t.x"), "schedule"),
        (lambda: Schedule(pattern="@at tomorrow", target="t.x"), "schedule"),
    ],
)
def test_bad_schedules_are_refused_naming_the_field(build, field):
    with pytest.raises(errors.InvalidArgumentError) as info:
        build()
    assert info.value.field == field


def test_the_schedules_own_subject_is_not_its_target():
    schedule = Schedule.every(5, target="jobs.run")
    with pytest.raises(errors.InvalidArgumentError, match="own subject"):
        schedule.check_for("jobs.run")
    with pytest.raises(errors.InvalidTypeError, match="Schedule"):
        PublishOptions(schedule="@every 5s")
