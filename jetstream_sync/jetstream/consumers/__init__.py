"""Consumers: the handle, its options, the pull engines and what they hand to the user.

Layout: ``consumer.py`` (the handle), ``options.py`` (FetchOptions, ConsumeOptions), ``delivery.py`` (the
DeliverySource / BatchSource protocols and the user handles over them), ``_pull.py`` (the pull engines),
``_status.py`` (ADR-37's status table), ``_heartbeat.py`` (one heartbeat monitor for every delivery),
``ordered.py`` (OrderedConsumer) over ``_ordered.py`` (the consumer chain and the order-checking engines).
"""

from __future__ import annotations

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
from .options import ConsumeOptions, FetchOptions, OrderedConsumerConfig, PullPlan
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
