"""jetstream_sync: a synchronous, thread-safe NATS JetStream client for code that does not run asyncio."""

from __future__ import annotations

import logging

from . import errors
from ._runtime import RawReply, Runtime
from .client import Client, connect
from .headers import Headers, HeadersInput
from .jetstream import (
    BatchSource,
    ConsumeContext,
    ConsumeOptions,
    Consumer,
    ConsumeStats,
    DeliverySource,
    FetchOptions,
    JetStream,
    JetStreamAPI,
    MessageBatch,
    MessagesIterator,
    OrderedConsumer,
    OrderedConsumerConfig,
    OrderedPushConsumer,
    PublishOptions,
    PullPlan,
    PushConsumer,
    PushOptions,
    Stream,
)
from .jetstream.advisories import Advisories
from .jetstream.consumers import ErrorHandler
from .message import AckSender, Msg, MsgMetadata, SequencePair
from .models import (
    AccountInfo,
    AccountLimits,
    AckPolicy,
    APIStats,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    SequenceInfo,
    StorageType,
    StoreCompression,
    StoredMsg,
    StreamConfig,
    StreamInfo,
    StreamState,
)
from .models.advisory import (
    Advisory,
    ConsumerAckMetric,
    ConsumerAction,
    ConsumerLeaderElected,
    MaxDeliveriesExceeded,
    MessageNaked,
    MessageTerminated,
    StreamAction,
    StreamLeaderElected,
    UnknownAdvisory,
)
from .options import ConnectOptions, ErrorCallback, EventCallback
from .subscription import Subscription

logging.getLogger("jetstream_sync").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "Advisories",
    "Advisory",
    "ConsumerAckMetric",
    "ConsumerAction",
    "ConsumerLeaderElected",
    "MaxDeliveriesExceeded",
    "MessageNaked",
    "MessageTerminated",
    "StreamAction",
    "StreamLeaderElected",
    "UnknownAdvisory",
    "APIStats",
    "AckSender",
    "ErrorCallback",
    "ErrorHandler",
    "EventCallback",
    "HeadersInput",
    "PullPlan",
    "RawReply",
    "BatchSource",
    "ConsumeContext",
    "ConsumeOptions",
    "ConsumeStats",
    "DeliverySource",
    "FetchOptions",
    "JetStreamAPI",
    "MessageBatch",
    "MessagesIterator",
    "OrderedConsumer",
    "OrderedConsumerConfig",
    "OrderedPushConsumer",
    "PushConsumer",
    "PushOptions",
    "PublishOptions",
    "Runtime",
    "SequencePair",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "Client",
    "ConnectOptions",
    "Consumer",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "Headers",
    "JetStream",
    "Msg",
    "MsgMetadata",
    "PubAck",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "Stream",
    "StreamConfig",
    "StreamInfo",
    "StreamState",
    "Subscription",
    "__version__",
    "connect",
    "errors",
]
