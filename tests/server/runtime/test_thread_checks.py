"""The IO-thread check is live in this suite on real clients: traffic passes it on the IO thread, and an IO-thread
operation called on the test's thread raises (docs/ARCHITECTURE.md, "Checked at run time")."""

from __future__ import annotations

import os

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync._delivery._pull import ContinuousPull
from jetstream_sync._runtime import CHECK_THREADS_ENV, io_thread_checks
from jetstream_sync.subscription import Subscription


@pytest.mark.skipif(os.environ.get(CHECK_THREADS_ENV) == "0", reason=f"{CHECK_THREADS_ENV}=0 turned the check off")
def test_the_suite_runs_with_the_io_thread_check_on(nats_url: str) -> None:
    checks = io_thread_checks()
    before = checks.violations
    assert checks.enabled
    assert hasattr(vars(Subscription)["_on_message"], "__wrapped__")
    assert hasattr(vars(ContinuousPull)["_on_message"], "__wrapped__")
    with jetstream_sync.connect(nats_url) as nc:
        sub = nc.subscribe("threadcheck.>")
        for i in range(200):
            nc.publish(f"threadcheck.{i}", b"x")
        nc.flush()
        assert [sub.next_msg(5).subject for _ in range(200)] == [f"threadcheck.{i}" for i in range(200)]
        assert checks.violations == before  # 200 deliveries through the checked handler, on the IO thread

        with pytest.raises(errors.WrongThreadError, match=r"Runtime\.send_now runs on its client's IO thread only"):
            nc.runtime.send_now(b"PING\r\n")
        assert checks.violations == before + 1
    checks.violations -= 1  # the one this test caused on purpose; the plugin would fail it otherwise
