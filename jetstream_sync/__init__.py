"""jetstream_sync: a synchronous, thread-safe NATS JetStream client for code that does not run asyncio."""

from __future__ import annotations

import logging

from . import errors
from .client import Client, ConnectOptions, connect
from .consumer import Consumer
from .headers import Headers
from .jetstream import JetStream
from .message import Msg, MsgMetadata
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
from .stream import Stream
from .subscription import Subscription

logging.getLogger("jetstream_sync").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "APIStats",
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
