"""The request mux: every registered reply resolves or fails, whatever one of them does (issue 26, item 7).

``handle`` and ``expire`` run on the IO thread only (checked in this suite), so the tests call them on one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from jetstream_sync import errors
from jetstream_sync._runtime._io import IOLoop
from jetstream_sync._runtime._mux import RequestMux


@pytest.fixture
def on_io() -> Iterator[Callable[[Callable[[], None]], None]]:
    """``on_io(fn)``: run ``fn()`` on an IO thread and wait for it."""
    loop = IOLoop()

    async def run(fn: Callable[[], None]) -> None:
        fn()

    yield lambda fn: loop.call(run(fn), 5.0, "test")
    loop.cancel_calls()
    loop.stop(2.0)


class Entry:
    def __init__(self, *, resolve_raises: bool = False, fail_raises: bool = False) -> None:
        self.failed: list[BaseException] = []
        self.resolved = 0
        self._resolve_raises = resolve_raises
        self._fail_raises = fail_raises

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        if self._resolve_raises:
            raise KeyError("a decoder's bug")
        self.resolved += 1

    def fail(self, exc: BaseException) -> None:
        self.failed.append(exc)
        if self._fail_raises:
            raise RuntimeError("a broken entry")


def test_an_entry_whose_resolve_raises_is_failed_not_left_pending(caplog, on_io):
    mux = RequestMux("_INBOX", "t")
    entry = Entry(resolve_raises=True)
    subject = mux.register(entry)
    with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
        on_io(lambda: mux.handle(subject, b"", b"{}", None))
    assert len(mux) == 0
    assert isinstance(entry.failed[0], errors.ProtocolError) and "KeyError" in str(entry.failed[0])


def test_one_broken_entry_does_not_stop_the_others_failing_on_disconnect(caplog):
    mux = RequestMux("_INBOX", "t")
    entries = [Entry(), Entry(fail_raises=True), Entry()]
    for entry in entries:
        mux.register(entry)
    with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
        mux.fail_all(errors.NotConnectedError)
    assert all(len(entry.failed) == 1 for entry in entries)
    assert "failing a pending reply raised" in caplog.text


def test_one_broken_entry_does_not_stop_the_others_expiring(on_io):
    mux = RequestMux("_INBOX", "t")
    entries = [Entry(), Entry(fail_raises=True), Entry()]
    for entry in entries:
        mux.register(entry, timeout=0.0)
    on_io(lambda: mux.expire(float("inf")))
    assert all(isinstance(entry.failed[0], errors.TimeoutError) for entry in entries)
    assert len(mux) == 0
