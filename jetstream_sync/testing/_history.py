"""History: a thread-safe, Jepsen-style record of the operations a workload ran, for the checkers.

Each operation is recorded twice, as Jepsen does: when it is invoked (``History.invoke``, which reads the clock
before the call is made) and when it completes (``PendingOperation.ok``, ``fail`` or ``info``, which read it
after the call returned). The checker only trusts those two instants: the operation took effect somewhere
between them, or, for an ``info`` outcome (a timeout, a lost connection: the client cannot know), at any time
after the invocation or never. Such an operation stays open to the end of the history; its completion time is
kept for the report only.

Outcomes say what the caller knows, not what it hoped: ``ok`` (done; a read carries the value it saw, a write
the revision it made), ``fail`` (definitely not done: the server refused it, e.g. a compare-and-set on a
revision that is no longer the latest) and ``info`` (unknown). Calling a refusal ``fail`` that may in fact
have been applied is exactly the bug the checker looks for, so a workload must say ``info`` whenever it is not
sure.

Two families of operations share one history, so that one run's faults line up with everything it did:

- a key-value **register**: ``read``, ``write`` and ``cas`` of a key, for the linearizability checker
  (``check_history``);
- a **queue** and its **watchers**: ``publish`` of a message to a stream (its outcome, the stream sequence its
  PubAck named, its ``msg_id``), and the observations of readers: ``receive`` (a message a reader got: the reader,
  how it read, the stream sequence, the delivery count) and ``watch`` (a key-value entry a watcher got: the key,
  its value, its revision). An observation happened when it was recorded: it is complete at once
  ([`History.observe`][jetstream_sync.testing.History.observe], or
  [`History.received`][jetstream_sync.testing.History.received] and
  [`History.watched`][jetstream_sync.testing.History.watched] given the message or entry). ``check_queue`` and
  ``check_watches`` judge them.

Every operation records the thread that ran it, besides its process.

A history saves to and loads from JSON lines (one operation or event per line) so that a failing run can be
checked again, or a checker change tried on it, without the cluster that produced it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ..errors import InvalidArgumentError, InvalidTypeError

if TYPE_CHECKING:
    from ..message import Msg
    from ..models.kv import KeyValueEntry

__all__ = [
    "OBSERVATIONS",
    "operations_and_events",
    "REGISTER_KINDS",
    "History",
    "HistoryEvent",
    "OpKind",
    "OpOutcome",
    "Operation",
    "PendingOperation",
]

OpKind = Literal["read", "write", "cas", "publish", "receive", "watch"]
OpOutcome = Literal["ok", "fail", "info"]

#: the operations on a key-value register, which ``check_history`` judges
REGISTER_KINDS: frozenset[str] = frozenset({"read", "write", "cas"})
#: what a reader saw: complete when recorded (``History.observe``)
OBSERVATIONS: frozenset[str] = frozenset({"receive", "watch"})
_KINDS: frozenset[str] = REGISTER_KINDS | OBSERVATIONS | {"publish"}
_OUTCOMES: frozenset[str] = frozenset({"ok", "fail", "info"})


def _optional_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidTypeError(attribute.name, f"must be a str or None, got {type(value).__name__}")


def _optional_int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidTypeError(attribute.name, f"must be an int or None, got {type(value).__name__}")


def _int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(attribute.name, f"must be an int, got {type(value).__name__}")


def _str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise InvalidTypeError(attribute.name, f"must be a str, got {type(value).__name__}")


def _one_of(choices: frozenset[str]) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value not in choices:
            raise InvalidArgumentError(attribute.name, f"must be one of {sorted(choices)}, got {value!r}")

    return check


@attrs.frozen(kw_only=True)
class Operation:
    """One completed (or still open) operation of a history.

    On a register's ``key``: ``read`` (``result`` is the value seen, None for "no value"), ``write`` of ``value``,
    or ``cas`` (compare-and-set: ``value`` replaces ``expected``, None meaning "the key has no value").
    ``revision`` is what the server reported, when it did: the revision a write made, the revision of the value
    read.

    On a queue, ``key`` is the stream: ``publish`` of the message ``value`` (what identifies it: a workload
    publishes each once, and again only to retry it), with ``msg_id`` when it carried one; ``revision`` is the
    stream sequence its PubAck named. ``receive``: ``reader`` got the message ``result`` at stream sequence
    ``revision``, delivered for the ``delivered``-th time, by way of ``via`` (``consume``, ``messages``,
    ``fetch``, ``next``, ``ordered``). ``watch``: the watcher ``reader`` got key ``key`` (here the key, not the
    stream) at ``revision`` with value ``result`` (None for a delete or purge marker), ``via`` ``watch``.

    Times are ``time.monotonic_ns()``; ``complete_ns`` is None for an operation that never completed (then its
    outcome is ``info``). ``index`` is its place in invocation order, ``process`` the logical process that ran
    it: Jepsen's convention is a new process after an ``info``, since the thread cannot know whether its call is
    still going on. ``thread`` names the thread that ran it.
    """

    index: int = attrs.field(validator=_int)
    process: int = attrs.field(validator=_int)
    kind: OpKind = attrs.field(validator=_one_of(_KINDS))
    key: str = attrs.field(validator=_str)
    value: str | None = attrs.field(default=None, validator=_optional_str)
    expected: str | None = attrs.field(default=None, validator=_optional_str)
    invoke_ns: int = attrs.field(validator=_int)
    complete_ns: int | None = attrs.field(default=None, validator=_optional_int)
    outcome: OpOutcome = attrs.field(default="info", validator=_one_of(_OUTCOMES))
    result: str | None = attrs.field(default=None, validator=_optional_str)
    revision: int | None = attrs.field(default=None, validator=_optional_int)
    error: str | None = attrs.field(default=None, validator=_optional_str)
    msg_id: str | None = attrs.field(default=None, validator=_optional_str)
    reader: str | None = attrs.field(default=None, validator=_optional_str)
    via: str | None = attrs.field(default=None, validator=_optional_str)
    delivered: int | None = attrs.field(default=None, validator=_optional_int)
    thread: str | None = attrs.field(default=None, validator=_optional_str)

    @property
    def written(self) -> str | None:
        """The value this operation puts in the register if it takes effect (None for a read)."""
        return self.value if self.kind in ("write", "cas") else None

    def to_json(self) -> dict[str, Any]:
        """The operation as a JSON object (one line of a saved history)."""
        body = attrs.asdict(self)
        body["type"] = "op"
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Operation:
        """The operation a [`to_json`][jetstream_sync.testing.Operation.to_json] object describes; InvalidArgumentError
        for an unknown field."""
        fields = {k: v for k, v in body.items() if k != "type"}
        unknown = set(fields) - {a.name for a in attrs.fields(cls)}
        if unknown:
            raise InvalidArgumentError("history", f"unknown operation fields {sorted(unknown)}")
        return cls(**fields)

    def describe(self, origin_ns: int = 0) -> str:
        """One line for reports: ``p3 cas k1 'a'->'b' ok rev=7 [1.204s, 1.208s]`` (times from ``origin_ns``)."""
        if self.kind in ("read", "receive", "watch"):
            what = f"{self.kind} {self.key}" + (f" -> {self.result!r}" if self.outcome == "ok" else "")
            if self.reader is not None:
                what += f" by {self.reader}" + (f" ({self.via})" if self.via and self.via != self.kind else "")
        elif self.kind == "cas":
            what = f"cas {self.key} {self.expected!r}->{self.value!r}"
        else:
            what = f"{self.kind} {self.key} {self.value!r}" + (f" msg_id={self.msg_id}" if self.msg_id else "")
        name = "seq" if self.kind in ("publish", "receive") else "rev"
        rev = f" {name}={self.revision}" if self.revision is not None else ""
        if self.delivered is not None:
            rev += f" delivered={self.delivered}"
        end = "open" if self.complete_ns is None or self.outcome == "info" else _seconds(self.complete_ns, origin_ns)
        err = f" ({self.error})" if self.error and self.outcome != "ok" else ""
        return f"p{self.process} {what} {self.outcome}{rev} [{_seconds(self.invoke_ns, origin_ns)}, {end}]{err}"


def _seconds(ns: int, origin_ns: int) -> str:
    return f"{(ns - origin_ns) / 1e9:.3f}s"


@attrs.frozen(kw_only=True)
class HistoryEvent:
    """Something that happened to the system while the workload ran (a fault applied or healed), kept with the
    history so that a report can line anomalies up with the faults around them."""

    time_ns: int
    what: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object (one line of a saved history)."""
        return {"type": "event", "time_ns": self.time_ns, "what": self.what, "detail": self.detail}


class PendingOperation:
    """An invoked operation waiting for its outcome; complete it exactly once with
    [`ok`][jetstream_sync.testing.PendingOperation.ok], [`fail`][jetstream_sync.testing.PendingOperation.fail] or
    [`info`][jetstream_sync.testing.PendingOperation.info]. Thread-safe, though one thread normally owns it."""

    def __init__(self, history: History, index: int, template: Operation) -> None:
        self._history = history
        self._index = index
        self._template = template
        self._done = False

    @property
    def operation(self) -> Operation:
        """The operation as invoked (outcome ``info``, no completion yet)."""
        return self._template

    def ok(self, result: str | None = None, *, revision: int | None = None) -> Operation:
        """It took effect: a read saw ``result`` (None: no value), a write or cas made ``revision``, a publish was
        stored at stream sequence ``revision``."""
        if result is not None and self._template.kind != "read":
            raise InvalidArgumentError("result", f"only a read has a result, not a {self._template.kind}")
        return self._complete("ok", result=result, revision=revision)

    def fail(self, error: str | BaseException) -> Operation:
        """It definitely did not take effect (the server refused it)."""
        return self._complete("fail", error=_error_text(error))

    def info(self, error: str | BaseException) -> Operation:
        """Nobody knows whether it took effect (a timeout, a lost connection): it stays open to the end."""
        return self._complete("info", error=_error_text(error))

    def _complete(self, outcome: OpOutcome, **fields: Any) -> Operation:
        now = time.monotonic_ns()
        done = attrs.evolve(self._template, outcome=outcome, complete_ns=now, **fields)
        self._history._complete(self._index, done, self)
        return done


def _error_text(error: str | BaseException) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"[:300]
    return str(error)[:300]


class History:
    """A thread-safe, append-only record of operations (on key-value registers, queues and their watchers), and
    of the faults around them.

    Any number of threads call [`invoke`][jetstream_sync.testing.History.invoke] and complete what it returns, or record
    what a reader saw with [`observe`][jetstream_sync.testing.History.observe]
    ([`received`][jetstream_sync.testing.History.received], [`watched`][jetstream_sync.testing.History.watched]);
    [`operations`][jetstream_sync.testing.History.operations] is a snapshot in invocation order in which operations
    still pending count as ``info`` (open). [`save`][jetstream_sync.testing.History.save] and
    [`load`][jetstream_sync.testing.History.load] keep a history as JSON lines. ``operations`` and ``events`` given to
    the constructor make one from a saved or hand-made list (the unit
    tests of the checkers do that).
    """

    def __init__(self, operations: Iterable[Operation] = (), events: Iterable[HistoryEvent] = ()) -> None:
        self._lock = threading.Lock()
        self._ops: list[Operation] = list(operations)
        self._pending: dict[int, PendingOperation] = {}
        self._events: list[HistoryEvent] = list(events)
        self._next_process = 1 + max((op.process for op in self._ops), default=-1)

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.operations)

    def __repr__(self) -> str:
        with self._lock:
            return f"<History {len(self._ops)} operations, {len(self._pending)} pending, {len(self._events)} events>"

    # -- recording ----------------------------------------------------------------------------------------
    def new_process(self, *, modulo: int = 1, remainder: int = 0) -> int:
        """A process number not used yet: a thread takes a new one after an ``info`` outcome (Jepsen's rule).

        With ``modulo``, the smallest unused number that leaves ``remainder``: a workload whose thread ``t`` of
        ``n`` takes ``new_process(modulo=n, remainder=t)`` can tell the thread from the process (``p % n``), and
        shares the history with others that take theirs from here too."""
        if modulo < 1 or not 0 <= remainder < modulo:
            raise InvalidArgumentError("remainder", f"must be 0 to {modulo - 1} for modulo {modulo}, got {remainder}")
        with self._lock:
            number = self._next_process + (remainder - self._next_process) % modulo
            self._next_process = number + 1
            return number

    def invoke(
        self,
        process: int,
        kind: OpKind,
        key: str,
        *,
        value: str | None = None,
        expected: str | None = None,
        msg_id: str | None = None,
    ) -> PendingOperation:
        """Record that ``process`` now starts ``kind`` on ``key`` (the clock is read here, before the call is
        made); complete the returned handle when the call returns. A ``publish`` names its stream as ``key``,
        the message as ``value`` and its ``msg_id`` if it has one. Observations (``receive``, ``watch``) are
        recorded with [`observe`][jetstream_sync.testing.History.observe] instead."""
        if kind in OBSERVATIONS:
            raise InvalidArgumentError("kind", f"a {kind} is an observation: record it with History.observe")
        if kind != "read" and value is None:
            raise InvalidArgumentError("value", f"a {kind} needs the value it writes")
        if kind != "cas" and expected is not None:
            raise InvalidArgumentError("expected", "only a cas has an expected value")
        if kind != "publish" and msg_id is not None:
            raise InvalidArgumentError("msg_id", "only a publish has a msg_id")
        with self._lock:
            index = len(self._ops)
            template = Operation(
                index=index,
                process=process,
                kind=kind,
                key=key,
                value=value,
                expected=expected,
                msg_id=msg_id,
                invoke_ns=time.monotonic_ns(),
                error="pending",
                thread=threading.current_thread().name,
            )
            self._ops.append(template)
            self._next_process = max(self._next_process, process + 1)
            pending = PendingOperation(self, index, template)
            self._pending[index] = pending
            return pending

    def _complete(self, index: int, done: Operation, pending: PendingOperation) -> None:
        with self._lock:
            if self._pending.get(index) is not pending:
                raise InvalidArgumentError("operation", f"operation {index} was completed already")
            del self._pending[index]
            self._ops[index] = done

    def observe(
        self,
        process: int,
        kind: Literal["receive", "watch"],
        key: str,
        *,
        reader: str,
        result: str | None,
        revision: int,
        via: str | None = None,
        delivered: int | None = None,
    ) -> Operation:
        """Record what a reader saw, now: complete (``ok``) at once, since it happened when it was seen. A
        ``receive`` of message ``result`` from stream ``key`` at stream sequence ``revision`` (its ``delivered``
        count, read by way of ``via``), or a ``watch`` of key ``key`` at ``revision`` with value ``result`` (None
        for a delete or purge marker). Thread-safe; the thread is recorded."""
        if kind not in OBSERVATIONS:
            raise InvalidArgumentError("kind", f"must be one of {sorted(OBSERVATIONS)}, got {kind!r}")
        now = time.monotonic_ns()
        with self._lock:
            op = Operation(
                index=len(self._ops),
                process=process,
                kind=kind,
                key=key,
                invoke_ns=now,
                complete_ns=now,
                outcome="ok",
                result=result,
                revision=revision,
                reader=reader,
                via=via if via is not None else kind if kind == "watch" else None,
                delivered=delivered,
                thread=threading.current_thread().name,
            )
            self._ops.append(op)
            self._next_process = max(self._next_process, process + 1)
            return op

    def received(self, process: int, msg: Msg, *, reader: str, via: str, value: str | None = None) -> Operation:
        """Record that ``reader`` got the JetStream message ``msg`` by way of ``via`` (``consume``, ``messages``,
        ``fetch``, ``next``, ``ordered``): its stream, stream sequence and delivery count come from its metadata.
        ``value`` identifies the message as its publish was recorded (default: the payload as text)."""
        meta = msg.metadata
        return self.observe(
            process,
            "receive",
            meta.stream,
            reader=reader,
            result=value if value is not None else bytes(msg.data).decode("utf-8", "backslashreplace"),
            revision=meta.sequence.stream,
            via=via,
            delivered=meta.num_delivered,
        )

    def watched(self, process: int, entry: KeyValueEntry, *, reader: str) -> Operation:
        """Record that the watcher ``reader`` got ``entry`` (its key, revision, and value as text; None for a
        delete or purge marker)."""
        from ..models.kv import KeyValueOp  # the models load only with the client; a history alone needs neither

        value = None if entry.operation is not KeyValueOp.PUT else entry.value.decode("utf-8", "backslashreplace")
        return self.observe(process, "watch", entry.key, reader=reader, result=value, revision=entry.revision)

    def note(self, what: str, detail: str = "") -> HistoryEvent:
        """Record an event (a fault applied, healed) at the current time."""
        event = HistoryEvent(time_ns=time.monotonic_ns(), what=what, detail=detail)
        with self._lock:
            self._events.append(event)
        return event

    # -- reading ------------------------------------------------------------------------------------------
    @property
    def operations(self) -> list[Operation]:
        """Every operation in invocation order; those still pending as ``info`` with no completion time."""
        with self._lock:
            return list(self._ops)

    @property
    def events(self) -> list[HistoryEvent]:
        """The events, in the order they were noted."""
        with self._lock:
            return list(self._events)

    @property
    def pending(self) -> int:
        """How many operations were invoked and not completed yet."""
        with self._lock:
            return len(self._pending)

    def keys(self) -> list[str]:
        """The keys (of registers, watched keys and streams) operated on, sorted."""
        return sorted({op.key for op in self.operations})

    def counts(self) -> dict[str, int]:
        """How many operations of each kind and outcome, as ``{"read ok": 120, "cas fail": 7, ...}``."""
        counts: dict[str, int] = {}
        for op in self.operations:
            name = f"{op.kind} {op.outcome}"
            counts[name] = counts.get(name, 0) + 1
        return dict(sorted(counts.items()))

    # -- persistence --------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the history as JSON lines (operations in invocation order, then the events); returns the path."""
        target = Path(path)
        lines = [json.dumps(op.to_json(), sort_keys=True) for op in self.operations]
        lines += [json.dumps(event.to_json(), sort_keys=True) for event in self.events]
        target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> History:
        """A history written by [`save`][jetstream_sync.testing.History.save]; InvalidArgumentError names the first line
        that is not one."""
        operations: list[Operation] = []
        events: list[HistoryEvent] = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    body = json.loads(line)
                    if body.get("type") == "event":
                        events.append(HistoryEvent(time_ns=body["time_ns"], what=body["what"], detail=body["detail"]))
                    else:
                        operations.append(Operation.from_json(body))
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    raise InvalidArgumentError("path", f"{path}: line {number} is not a history line: {exc}") from exc
        return cls(operations, events)


def operations_and_events(history: History | Iterable[Operation]) -> tuple[list[Operation], tuple[HistoryEvent, ...]]:
    """What a checker reads of what it is given: a History's operations and events, or a list of operations
    (from a saved or hand-made history) and no events."""
    if isinstance(history, History):
        return history.operations, tuple(history.events)
    return list(history), ()
