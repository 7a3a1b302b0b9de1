"""Consumers: the handles, user-thread code over the delivery layer (``_delivery/``).

Layout: ``consumer.py`` (the pull consumer's handle), ``delivery.py`` (the user handles over the
DeliverySource / BatchSource contract), ``_reads.py`` (what the handles share), ``ordered.py`` (OrderedConsumer,
with ``_ordered_fetch.py``, an ordered fetch's order check, and ``_chain.py``, the chain of server-side consumers),
``push.py`` (push consumers), ``_progress.py`` (auto_in_progress). The engines that run on the IO thread are in
``_delivery/``; the options of reads in ``models/reads.py``.
"""

from __future__ import annotations

from ...models.reads import ConsumeOptions, FetchOptions, OrderedConsumerConfig, PullPlan
from .consumer import Consumer
from .delivery import (
    BatchSource,
    ConsumeContext,
    ConsumeStats,
    DeliverySource,
    ErrorHandler,
    MessageBatch,
    MessagesIterator,
)
from .ordered import OrderedConsumer
from .push import OrderedPushConsumer, PushConsumer, PushOptions, check_push_config

__all__ = [
    "BatchSource",
    "ConsumeContext",
    "ConsumeOptions",
    "ConsumeStats",
    "Consumer",
    "DeliverySource",
    "ErrorHandler",
    "FetchOptions",
    "MessageBatch",
    "MessagesIterator",
    "OrderedConsumer",
    "OrderedConsumerConfig",
    "OrderedPushConsumer",
    "PullPlan",
    "PushConsumer",
    "PushOptions",
    "check_push_config",
]
