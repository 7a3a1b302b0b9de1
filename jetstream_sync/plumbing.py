"""The types for code that extends the client rather than uses it: the ports its layers talk through.

An application needs none of these: it connects, publishes, consumes and manages streams through
[`Client`][jetstream_sync.Client], [`JetStream`][jetstream_sync.JetStream] and the handles they return. A library
that builds on jetstream-sync (a framework integration, a new kind of reader, a call this client does not wrap
yet) needs the seams between the layers (docs/ARCHITECTURE.md, "Layers and imports"), and imports them from here:

    from jetstream_sync.plumbing import DeliverySource, Runtime

- [`Runtime`][jetstream_sync.Runtime]: the thread boundary of one client (``client.runtime``, ``js.runtime``), and
  [`RawReply`][jetstream_sync.RawReply], a reply as it came.
- [`JetStreamAPI`][jetstream_sync.JetStreamAPI]: requests to the JetStream API with typed errors (``js.api``).
- [`AckSender`][jetstream_sync.AckSender]: what a message acknowledges through, and
  [`AckNextSender`][jetstream_sync.plumbing.AckNextSender], one that can also start ``Msg.ack_next``'s pull.
- [`DeliverySource`][jetstream_sync.DeliverySource] and [`BatchSource`][jetstream_sync.BatchSource]: what the
  message iterators, consume contexts and batches read, and [`PullPlan`][jetstream_sync.PullPlan], how a consume
  pulls.

The same objects are importable from ``jetstream_sync`` too (``jetstream_sync.Runtime``), where earlier releases
exported them; they are left out of its ``__all__``, which lists what applications use.
"""

from __future__ import annotations

from ._runtime import RawReply, Runtime
from .jetstream.api import JetStreamAPI
from .jetstream.consumers.delivery import BatchSource, DeliverySource
from .message import AckNextSender, AckSender
from .models.reads import PullPlan

__all__ = [
    "AckNextSender",
    "AckSender",
    "BatchSource",
    "DeliverySource",
    "JetStreamAPI",
    "PullPlan",
    "RawReply",
    "Runtime",
]
