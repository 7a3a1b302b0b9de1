"""The delivery layer: the state machines that run on the IO thread, between the runtime and the handles.

``_runtime/`` owns the loop and the socket; ``jetstream/`` holds the handles, user-thread code that validates
input and talks to the JetStream API. Between them, this layer turns what arrives on a subscription into
messages in a bounded buffer and asks the server for more:

- `DeliveryEngine` (``_engine.py``): the lifecycle and the accounting of an unbounded delivery, written once;
- the *feeds*, which say only how messages are asked for and statuses read: `ContinuousPull` (``_pull.py``,
  ADR-37's consume), `PushEngine` (``_push.py``, ADR-15's push with flow control and gap detection), and the
  bounded pulls `FetchPull` / `AckNextPull` (``_fetch.py``) and `SinglePull` (``_single.py``, ``next()``);
- `Ordering` (``_ordering.py``), ordering over any feed: `OrderedPull` and `OrderedPush` (``_ordered.py``);
- their parts: the heartbeat monitor, ADR-37's status table, the consumer's request limits, giving messages
  back, the pull target and pin, the acks messages go through.

Every ``@io_thread`` method here runs on the client's IO thread (the check in ``_runtime/_threads.py`` proves it
in the test suite); the members of the [`DeliverySource`][jetstream_sync.DeliverySource] and
[`BatchSource`][jetstream_sync.BatchSource] contract (``_sources.py``) are what the user threads call. The layer
imports the runtime and the foundation modules (messages, models, errors), never ``jetstream/``: the server-side
chain of an ordered consumer comes in as an `OrderedLink`. docs/ARCHITECTURE.md, "The delivery layer", has the
recipes for a new consumer kind.
"""

from __future__ import annotations

from ._acks import ConsumerAcks
from ._engine import DeliveryEngine, Engine
from ._fetch import AckNextPull, FetchPull
from ._ordered import CATCH_UP_CHECK, CatchUpProbe, OrderedPull, OrderedPush
from ._ordering import RESET_BACKOFF_FIRST, RESET_BACKOFF_MAX, OrderedLink, Ordering, next_backoff
from ._pull import ContinuousPull
from ._push import PushEngine, PushLimits
from ._single import SinglePull
from ._sources import BatchSource, ConsumeStats, DeliverySource
from ._target import PinTracker, PullTarget, pulled_message, read_timed_out

__all__ = [
    "CATCH_UP_CHECK",
    "RESET_BACKOFF_FIRST",
    "RESET_BACKOFF_MAX",
    "AckNextPull",
    "BatchSource",
    "CatchUpProbe",
    "ConsumeStats",
    "ConsumerAcks",
    "ContinuousPull",
    "DeliveryEngine",
    "DeliverySource",
    "Engine",
    "FetchPull",
    "OrderedLink",
    "OrderedPull",
    "OrderedPush",
    "Ordering",
    "PinTracker",
    "PullTarget",
    "PushEngine",
    "PushLimits",
    "SinglePull",
    "next_backoff",
    "pulled_message",
    "read_timed_out",
]
