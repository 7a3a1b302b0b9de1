"""Read consistency of a replicated bucket: which server may answer a read, and how a stale answer is caught.

A replicated stream's replicas apply writes a few milliseconds apart, and a direct get is answered by any of
them, so a read right after a completed write can return the value before it (measured on an R3 bucket: 50 of
2,000 ``put``-then-``get`` pairs on one connection). nats-server has no read that names the sequence it must
reflect (its 2.12 design for one, ``min_last_seq``, was withdrawn before release: ``server/jetstream_api.go``
refuses the field), so the client keeps what it needs itself. Three read modes:

``"direct"``
    Any replica answers, as fast as a read gets. It may return a value older than a write that completed
    before it, this client's own included.
``"read_your_writes"`` (the default)
    Any replica answers, and the answer is checked against what this client knows of the key: the revision it
    last wrote or read there (`KnownRevisions`). An older revision, or "not found" for a key it knows,
    is a replica behind; the read is asked again of the stream leader. So a client always sees its own
    completed writes and never goes back in time on a key (monotonic reads), at no cost while replicas keep up
    (one more round trip when one lags). Writes by other clients, completed before the read started, may still
    be missing.
``"leader"``
    The stream leader answers (the JetStream API's message get), so the read sees every write acknowledged
    before it started, whoever made it, with the same check against what the client knows. The exception is a
    network partition: until a deposed leader notices it has lost its quorum it still answers, from what it
    had (see the reliability guide). All such reads load one server.

Known revisions are per client, for `KNOWN_KEYS` keys at most (the least recently used are forgotten
first), and shared by every handle of that client. They are filed under the stream's incarnation (its name and
creation time): a bucket deleted and made anew starts its revisions at 1 again, and a handle that meets
revisions below what it knows asks the stream's info, and moves on to the new incarnation when it finds one.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, NamedTuple, get_args

from .. import errors

if TYPE_CHECKING:
    from ..models import StoredMsg, StreamInfo

__all__ = [
    "DOUBT_WINDOW",
    "KNOWN_KEYS",
    "Answer",
    "KnownRevisions",
    "ReadMode",
    "check_read_mode",
    "incarnation_of",
    "known_revisions_of",
    "read_checked",
]

#: how a read picks the server that answers it, and what it checks (see the module's text)
ReadMode = Literal["direct", "read_your_writes", "leader"]
_READ_MODES: tuple[str, ...] = get_args(ReadMode)

#: seconds after an unanswered write during which a compare-and-set refusal of that stream is confirmed: a
#: deposed stream leader steps down at most about 20 s after it lost its quorum (nats-server's raft)
DOUBT_WINDOW = 30.0
#: the most keys a client remembers a revision of, for read_your_writes (about 150 bytes each)
KNOWN_KEYS = 50_000


def check_read_mode(field: str, value: object) -> ReadMode:
    """``value`` as a read mode; InvalidArgumentError naming ``field`` and the choices otherwise."""
    if value not in _READ_MODES:
        raise errors.InvalidArgumentError(field, f"must be one of {', '.join(map(repr, _READ_MODES))}, got {value!r}")
    return value  # type: ignore[return-value]


class Answer(NamedTuple):
    """What `read_checked` read: the message (None: "not found") and whether the stream leader said so."""

    stored: StoredMsg | None
    from_leader: bool


def read_checked(
    mode: ReadMode,
    allow_direct: bool,
    direct: Callable[[], StoredMsg | None],
    leader: Callable[[], StoredMsg | None],
    behind: Callable[[StoredMsg | None], bool],
) -> Answer:
    """Calling thread: one read as ``mode`` says. ``direct`` asks any replica, ``leader`` the stream leader (also
    when the stream allows no direct get); under ``read_your_writes`` a replica's answer that ``behind`` calls
    older than what the client knows is passed over for the leader's."""
    if mode != "leader" and allow_direct:
        stored = direct()
        if mode == "direct" or not behind(stored):
            return Answer(stored, False)
    return Answer(leader(), True)


def incarnation_of(info: StreamInfo) -> str:
    """The name under which `KnownRevisions` files a stream's keys: its name and creation time, so a
    stream deleted and made anew under the same name (revisions from 1 again) is another stream to it."""
    return f"{info.config.name}@{info.created.isoformat()}"


class KnownRevisions:
    """Any thread: the highest revision (stream sequence) this client wrote or read for each key (a subject of
    a stream, named with the API prefix so one name in two domains is two keys), least recently used first.

    A read that returns less than this for a key came from a replica that is behind.
    """

    def __init__(self, capacity: int = KNOWN_KEYS) -> None:
        self._lock = threading.Lock()
        self._capacity = capacity
        self._known: OrderedDict[tuple[str, str, str], int] = OrderedDict()
        self._timed_out: dict[tuple[str, str], float] = {}

    def write_timed_out(self, prefix: str, stream: str) -> None:
        """Remember that a write of this client to ``stream`` went unanswered: a server cut off from its
        cluster may hold it in flight, and answer for the stream falsely until it steps down."""
        self._timed_out[(prefix, stream)] = time.monotonic()

    def doubtful(self, prefix: str, stream: str) -> bool:
        """Whether a write of this client to ``stream`` went unanswered within `DOUBT_WINDOW` seconds."""
        when = self._timed_out.get((prefix, stream))
        return when is not None and time.monotonic() - when < DOUBT_WINDOW

    def saw(self, prefix: str, stream: str, subject: str, revision: int) -> None:
        """Remember that ``subject`` of ``stream`` had ``revision`` (a write's ack, or an entry read)."""
        key = (prefix, stream, subject)
        with self._lock:
            known = self._known.get(key, 0)
            self._known[key] = max(known, revision)
            self._known.move_to_end(key)
            if len(self._known) > self._capacity:
                self._known.popitem(last=False)

    def forget(self, prefix: str, stream: str, subject: str) -> None:
        """Drop what is known of ``subject``: the stream leader says it has no message (its history was purged)."""
        with self._lock:
            self._known.pop((prefix, stream, subject), None)

    def known(self, prefix: str, stream: str, subject: str) -> int:
        """The highest revision known for ``subject`` of ``stream`` (0: nothing known)."""
        return self._known.get((prefix, stream, subject), 0)

    def __len__(self) -> int:
        return len(self._known)


_KNOWN: weakref.WeakKeyDictionary[object, KnownRevisions] = weakref.WeakKeyDictionary()
_KNOWN_LOCK = threading.Lock()


def known_revisions_of(client: object) -> KnownRevisions:
    """The `KnownRevisions` of ``client`` (made on first use, gone with the client). Any object its handles share
    and that lives as long as it will do (``js.client``); only its identity is used, so this module needs no
    import of the client facade."""
    known = _KNOWN.get(client)
    if known is None:
        with _KNOWN_LOCK:
            known = _KNOWN.get(client)
            if known is None:
                known = _KNOWN[client] = KnownRevisions()
    return known
