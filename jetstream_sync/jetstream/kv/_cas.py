"""A compare-and-set write whose refusal is confirmed when the server that refused it may have been deposed.

Just after a network partition heals, two nodes can both believe they lead a stream: the old leader, cut off
for a few seconds and not yet stepped down, and the one the majority elected meanwhile. Both answer a publish,
and the client keeps the first answer. The old leader answers first, from stale state: 10164 ("wrong last
sequence", while a write it could never commit holds the key in flight) or 10071 naming an old revision. The new
leader stores the write a moment later. The caller is told "not written" about a write that happened
(reproduced in ``docs/upstream/kv-cas-refused-but-stored.md``, nearly every attempt).

The answers themselves look alike, but the client can tell when one is in doubt:

- the refusal names a revision older than one this client has already written or read for the key (only a
  stale server says that); or
- a write of this client to the stream went unanswered in the last `DOUBT_WINDOW`
  seconds (the in-flight write behind a deposed leader's 10164 is such a write).

Every compare-and-set carries a unique ``Nats-Msg-Id``, and a refusal in doubt is confirmed by sending the same
message again after `CONFIRM_AFTER` seconds, by when a deposed leader whose routes are back has stepped
down. The stream checks the id before anything else (``checkMsgHeadersPreClusteredProposal``): a duplicate
acknowledgement means the first attempt was stored (its sequence is the write's revision); 10158 means it is
still being stored (asked again); a refusal now comes from the real leader; a plain acknowledgement means it is
stored now, which is what the caller asked for. A refusal not in doubt costs nothing more.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from ... import errors
from ..publish import PublishOptions

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["CONFIRM_AFTER", "compare_and_set", "is_compare_and_set"]

#: seconds before a refusal in doubt is checked by sending the write again: two raft heartbeats, enough for a
#: deposed leader whose routes are back to learn of the new term and step down
CONFIRM_AFTER = 2.0
# "duplicate message id is in process": the first attempt is being stored right now
_ID_IN_PROCESS = 10158


def is_compare_and_set(options: PublishOptions | None) -> bool:
    """Whether a KV write expects the key's last revision (update, create, delete or purge with ``last``)."""
    return options is not None and options.expected_last_subject_sequence is not None


def compare_and_set(
    js: JetStream,
    subject: str,
    data: bytes,
    headers: dict[str, str] | None,
    options: PublishOptions,
    in_doubt: Callable[[errors.WrongLastSequenceError], bool],
) -> int:
    """Calling thread: publish a compare-and-set with a fresh message id, within the context's timeout; its
    stream sequence, or the WrongLastSequenceError of a refusal (confirmed first when ``in_doubt`` says so).

    A refusal in doubt that cannot be confirmed within the timeout raises TimeoutError: its outcome is unknown.
    """
    deadline = time.monotonic() + js.timeout
    options = attrs.evolve(options, msg_id=_new_id())
    try:
        return js.publish(subject, data, headers, options=options).seq
    except errors.WrongLastSequenceError as refusal:
        if not in_doubt(refusal):
            raise
        return _confirm(js, subject, data, headers, options, refusal, deadline)


def _confirm(
    js: JetStream,
    subject: str,
    data: bytes,
    headers: dict[str, str] | None,
    options: PublishOptions,
    refusal: errors.WrongLastSequenceError,
    deadline: float,
) -> int:
    if time.monotonic() + CONFIRM_AFTER >= deadline:
        raise _unconfirmed(subject, refusal)
    time.sleep(CONFIRM_AFTER)
    delay = 0.05
    while True:
        left = deadline - time.monotonic()
        try:
            return js.publish(subject, data, headers, options=options, timeout=max(0.001, left)).seq
        except errors.WrongLastSequenceError:
            raise refusal from None  # refused again, now by the leader: the first attempt was not stored
        except errors.TimeoutError as exc:
            raise _unconfirmed(subject, refusal) from exc
        except errors.APIError as exc:
            in_process = exc.err_code == _ID_IN_PROCESS or isinstance(exc, errors.ClusterUnavailableError)
            if not in_process or time.monotonic() + delay >= deadline:
                raise _unconfirmed(subject, refusal) from exc
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _unconfirmed(subject: str, refusal: errors.WrongLastSequenceError) -> errors.TimeoutError:
    return errors.TimeoutError(
        f"a compare-and-set on {subject} was refused ({refusal.description}) by a server that may have been "
        "cut off from its cluster (a write of this client to the stream went unanswered moments before), and "
        "whether it was stored could not be confirmed within the timeout; read the key to find out"
    )


def _new_id() -> str:
    """A message id no other write shares: 96 random bits."""
    return "kv-" + base64.urlsafe_b64encode(os.urandom(12)).decode()
