"""The JetStream layer: the context, streams, publishing, direct get and consumers. It talks to the runtime
port only (docs/ARCHITECTURE.md, "Layout").

``context.py`` (JetStream), ``api.py`` (JetStreamAPI: every API request), ``streams.py`` (Stream),
``publish.py`` (PublishOptions, publish_async's machinery), ``direct.py`` (direct get, single and batched),
``counter.py`` (ADR-49 counters), ``batch.py`` (ADR-50 atomic batches), ``schedule.py`` (ADR-51 message schedules),
``fast_publish.py`` (2.14 fast ingest),
``consumers/``. KV and the object store go in ``kv/`` and ``object_store/``, the ADR-15 subscribe API in
``subscribe.py``.
"""

from __future__ import annotations

from .api import JetStreamAPI
from .batch import AtomicBatch
from .consumers import (
    BatchSource,
    ConsumeContext,
    ConsumeOptions,
    Consumer,
    ConsumeStats,
    DeliverySource,
    FetchOptions,
    MessageBatch,
    MessagesIterator,
    OrderedConsumer,
    OrderedConsumerConfig,
    OrderedPushConsumer,
    PullPlan,
    PushConsumer,
    PushOptions,
)
from .context import JetStream
from .counter import Counter
from .dead_letter import DeadLetters
from .fast_publish import FastPubAck, FastPublisher
from .kv import KeyValue, KeyValueManager, KeyWatcher, WatchOptions
from .publish import PublishOptions
from .schedule import Schedule
from .streams import Stream

__all__ = [
    "AtomicBatch",
    "BatchSource",
    "ConsumeContext",
    "ConsumeOptions",
    "ConsumeStats",
    "Consumer",
    "Counter",
    "DeadLetters",
    "DeliverySource",
    "FastPubAck",
    "FastPublisher",
    "FetchOptions",
    "JetStream",
    "JetStreamAPI",
    "MessageBatch",
    "MessagesIterator",
    "OrderedConsumer",
    "OrderedConsumerConfig",
    "OrderedPushConsumer",
    "PushConsumer",
    "PushOptions",
    "PublishOptions",
    "PullPlan",
    "Schedule",
    "Stream",
    "KeyValue",
    "KeyValueManager",
    "KeyWatcher",
    "WatchOptions",
]
