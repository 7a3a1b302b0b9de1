"""Which protocol code runs: the pure-Python parser and PUB encoder alone, or with the compiled fast paths
(``_cscan.c``).

The way redis-py uses hiredis: the compiled extension is optional (``setup.py`` declares it so; it is built
where a C compiler and Python's headers exist and skipped where not), and the pure-Python parser in
``_parser.py`` is always installed and stays the reference. The extension only takes the common case off it:
runs of well-formed, complete MSG/HMSG frames for subscriptions with a fast handler, each dispatched to its
handler. Whatever else the server sends, and any frame the extension finds unusual, goes through the Python
code, so both paths accept the same input and raise the same errors (tests/unit/runtime/test_parser_paths.py
compares them on streams cut at every byte; CI runs the core suite on each path).

The extension also has a delivery sink (`DeliverySink`, ``_csink.c``): a pull engine's subscription handler
that builds each JetStream delivery's `Msg` in C and hands the engine a batch per read, in place of three
Python calls a message (``_delivery/_pullbase.py`` says when it is used).

The extension also encodes PUB/HPUB commands (`encode_pub`, `encode_pub_parts`): the same bytes as
``_protocol.py``'s functions, which stay the reference (tests/unit/runtime/test_encode_paths.py compares them),
at a quarter of their cost (measured: 61 against 220 ns for a 128 B publish), which is a tenth of a core publish.

``JETSTREAM_SYNC_PURE_PYTHON=1`` in the environment (read once, at import) makes the pure-Python path run even
where the extension was built: to rule the extension out when looking for a bug, and for CI's pure-Python run.
`PARSER` says which path is in use (for the parser and the encoder alike); it is logged once at import, at DEBUG.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

from .. import _protocol
from .._protocol import Command

__all__ = [
    "PARSER",
    "PURE_PYTHON_ENV",
    "REVISION",
    "DeliverySink",
    "Encode",
    "Scan",
    "encode_pub",
    "encode_pub_parts",
    "handler_failed",
    "scan",
]

log = logging.getLogger("jetstream_sync")

#: the environment variable that forces the pure-Python parser ("1"; "" or "0" leave the choice to what is built)
PURE_PYTHON_ENV = "JETSTREAM_SYNC_PURE_PYTHON"

#: ``scan(buf, pos, handlers, limit, stats, on_error) -> pos``: dispatch the fast-handler messages from ``pos``
#: on and return where the first operation it did not take starts (``_cscan.c`` says what it takes).
Scan = Callable[[bytes, int, dict[int, Any], int, dict[str, int], Callable[[Exception], None]], int]

#: the compiled extension's revision these sources expect (``_cscan.c``'s REVISION; another is a stale build)
REVISION = 2

#: ``encode(subject, reply, headers, payload)``: a PUB or HPUB command (``_protocol.encode_pub``'s signature)
Encode = Callable[[bytes, bytes, bytes | None, bytes], Command]


def handler_failed(exc: Exception) -> None:
    """IO thread: a fast handler raised; its message is dropped and the reading goes on (both paths)."""
    log.error("a message handler raised on the IO thread; the message was dropped", exc_info=exc)


def _load() -> tuple[ModuleType | None, Literal["compiled", "python"], str, int]:
    """The extension module and the path's name, or (None, "python"); why; and the level to log that at (a
    stale build is a broken install someone should rebuild: WARNING; the rest DEBUG)."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, "python", f"{PURE_PYTHON_ENV} is set", logging.DEBUG
    try:  # import_module: a missing extension is named as such (``from . import`` says "circular import")
        cscan = importlib.import_module("._cscan", __package__)
    except ImportError as exc:
        reason = "it was not built when installed: no C compiler or no Python headers, or PyPy"
        return None, "python", f"the compiled extension is not available ({reason}; {exc})", logging.DEBUG
    built = (getattr(cscan, "LARGE_PAYLOAD", None), getattr(cscan, "REVISION", 1))
    if built != (_protocol.LARGE_PAYLOAD, REVISION):  # built from other sources than these
        stale = f"the compiled extension {cscan.__file__} does not match this version of the package; reinstall it"
        return None, "python", stale, logging.WARNING
    return cscan, "compiled", f"the compiled extension {cscan.__file__}", logging.DEBUG


PARSER: Literal["compiled", "python"]
#: which path reads the server's messages and encodes publishes: "compiled" (``_cscan.c``, with the Python
#: parser for what it leaves) or "python" (the pure-Python parser and encoder alone)
_cscan, PARSER, _why, _level = _load()
scan: Scan | None = None if _cscan is None else _cscan.scan
#: ``DeliverySink(msg_type, slow, deliver, sender, ack_none, prefix, headers_fast)`` (``_csink.c``), or None
#: on the pure-Python path
DeliverySink: Any = None if _cscan is None else _cscan.DeliverySink
#: ``_protocol.encode_pub``, compiled where the extension is in use
encode_pub: Encode = _protocol.encode_pub if _cscan is None else _cscan.encode_pub
#: ``_protocol.encode_pub_parts``, compiled where the extension is in use
encode_pub_parts: Encode = _protocol.encode_pub_parts if _cscan is None else _cscan.encode_pub_parts
log.log(_level, "protocol parser: %s (%s)", PARSER, _why)  # the PUB encoder follows it
