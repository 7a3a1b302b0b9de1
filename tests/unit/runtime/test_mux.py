"""The request mux: every registered reply resolves or fails, whatever one of them does (issue 26, item 7)."""

from __future__ import annotations

import logging

from jetstream_sync import errors
from jetstream_sync._runtime._mux import RequestMux


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


def test_an_entry_whose_resolve_raises_is_failed_not_left_pending(caplog):
    mux = RequestMux("_INBOX", "t")
    entry = Entry(resolve_raises=True)
    subject = mux.register(entry)
    with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
        mux.handle(subject, b"", b"{}", None)
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


def test_one_broken_entry_does_not_stop_the_others_expiring():
    mux = RequestMux("_INBOX", "t")
    entries = [Entry(), Entry(fail_raises=True), Entry()]
    for entry in entries:
        mux.register(entry, timeout=0.0)
    mux.expire(float("inf"))
    assert all(isinstance(entry.failed[0], errors.TimeoutError) for entry in entries)
    assert len(mux) == 0
