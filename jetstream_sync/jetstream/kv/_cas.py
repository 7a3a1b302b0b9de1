"""A compare-and-set write whose refusal is confirmed before it is reported.

On a replicated stream nats-server refuses a write that expects a key's last revision with 10164 ("wrong last
sequence", no number) while another write to the key is being replicated. A history checker saw such a refusal
reported for a write that was stored after all (within a second after a partition healed; see
``docs/upstream/``). A caller told "not written" about a write that happened builds on a wrong state, so every
compare-and-set carries a unique ``Nats-Msg-Id``, and a 10164 refusal is checked by sending the same message
again. The server looks the id up before anything else (``checkMsgHeadersPreClusteredProposal``):

- the first write was stored: the answer is a duplicate acknowledgement with its sequence, the write's revision;
- it is still being stored: 10158 ("duplicate message id is in process"), so ask again shortly;
- it was refused: the id is unknown and the expectation is checked anew; a refusal now (10071 or 10164) is the
  answer, and if the conflicting write has meanwhile failed, the write is stored now, which is also a truthful
  outcome of the call.

A 10071 refusal ("wrong last sequence: N") is the leader's check against the revision it has, and is final.
The check costs one more round trip per 10164 refusal, none otherwise.
"""

from __future__ import annotations

import base64
import os
import time
from typing import TYPE_CHECKING

import attrs

from ... import errors
from ..publish import PublishOptions

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["compare_and_set", "is_compare_and_set"]

# "wrong last sequence" while another write to the subject is in flight: possibly stored after all
_IN_FLIGHT_REFUSAL = 10164
# "duplicate message id is in process": the first attempt is being stored right now
_ID_IN_PROCESS = 10158


def is_compare_and_set(options: PublishOptions | None) -> bool:
    """Whether a KV write expects the key's last revision (update, create, delete or purge with ``last``)."""
    return options is not None and options.expected_last_subject_sequence is not None


def compare_and_set(
    js: JetStream, subject: str, data: bytes, headers: dict[str, str] | None, options: PublishOptions
) -> int:
    """Calling thread: publish a compare-and-set with a fresh message id; its stream sequence, or the
    WrongLastSequenceError of a refusal confirmed as described above, within the context's timeout."""
    options = attrs.evolve(options, msg_id=_new_id())
    try:
        return js.publish(subject, data, headers, options=options).seq
    except errors.WrongLastSequenceError as refusal:
        if refusal.err_code != _IN_FLIGHT_REFUSAL:
            raise
        return _confirm(js, subject, data, headers, options, refusal)


def _confirm(
    js: JetStream,
    subject: str,
    data: bytes,
    headers: dict[str, str] | None,
    options: PublishOptions,
    refusal: errors.WrongLastSequenceError,
) -> int:
    deadline = time.monotonic() + js.timeout
    delay = 0.005
    while True:
        try:
            return js.publish(
                subject, data, headers, options=options, timeout=max(0.001, deadline - time.monotonic())
            ).seq
        except errors.WrongLastSequenceError:
            raise refusal from None  # the id is unknown to the stream: the first attempt was not stored
        except errors.APIError as exc:
            if exc.err_code != _ID_IN_PROCESS and not isinstance(exc, errors.ClusterUnavailableError):
                raise
            if time.monotonic() + delay >= deadline:
                raise errors.TimeoutError(
                    f"a compare-and-set on {subject} was refused with 10164 while another write was in flight, and "
                    "whether it was stored after all could not be confirmed in time; read the key to find out"
                ) from exc
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _new_id() -> str:
    """A message id no other write shares: 96 random bits."""
    return "kv-" + base64.urlsafe_b64encode(os.urandom(12)).decode()
