"""Which protocol parser runs: the pure-Python one alone, or with the compiled fast path (``_cscan.c``).

The way redis-py uses hiredis: the compiled extension is optional (``setup.py`` declares it so; it is built
where a C compiler and Python's headers exist and skipped where not), and the pure-Python parser in
``_parser.py`` is always installed and stays the reference. The extension only takes the common case off it:
runs of well-formed, complete MSG/HMSG frames for subscriptions with a fast handler, each dispatched to its
handler. Whatever else the server sends, and any frame the extension finds unusual, goes through the Python
code, so both paths accept the same input and raise the same errors (tests/unit/runtime/test_parser_paths.py
compares them on streams cut at every byte; CI runs the core suite on each path).

``JETSTREAM_SYNC_PURE_PYTHON=1`` in the environment (read once, at import) makes the pure-Python path run even
where the extension was built: to rule the extension out when looking for a bug, and for CI's pure-Python run.
`PARSER` says which path is in use; it is logged once at import, at DEBUG.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["PARSER", "PURE_PYTHON_ENV", "Scan", "handler_failed", "scan"]

log = logging.getLogger("jetstream_sync")

#: the environment variable that forces the pure-Python parser ("1"; "" or "0" leave the choice to what is built)
PURE_PYTHON_ENV = "JETSTREAM_SYNC_PURE_PYTHON"

#: ``scan(buf, pos, handlers, limit, stats, on_error) -> pos``: dispatch the fast-handler messages from ``pos``
#: on and return where the first operation it did not take starts (``_cscan.c`` says what it takes).
Scan = Callable[[bytes, int, dict[int, Any], int, dict[str, int], Callable[[Exception], None]], int]


def handler_failed(exc: Exception) -> None:
    """IO thread: a fast handler raised; its message is dropped and the reading goes on (both paths)."""
    log.error("a message handler raised on the IO thread; the message was dropped", exc_info=exc)


def _load() -> tuple[Scan | None, Literal["compiled", "python"], str]:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, "python", f"{PURE_PYTHON_ENV} is set"
    try:  # import_module: a missing extension is named as such (``from . import`` says "circular import")
        cscan = importlib.import_module("._cscan", __package__)
    except ImportError as exc:
        reason = "it was not built when installed: no C compiler or no Python headers, or PyPy"
        return None, "python", f"the compiled extension is not available ({reason}; {exc})"
    return cscan.scan, "compiled", f"the compiled extension {cscan.__file__}"


scan: Scan | None
#: which parser path reads the server's messages: "compiled" (``_cscan.c`` with the Python parser for what it
#: leaves) or "python" (the pure-Python parser alone)
PARSER: Literal["compiled", "python"]
scan, PARSER, _why = _load()
log.debug("protocol parser: %s (%s)", PARSER, _why)
