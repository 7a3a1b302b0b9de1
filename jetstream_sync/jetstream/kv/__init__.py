"""Key-value buckets (ADR-8) on JetStream streams: [`KeyValue`][jetstream_sync.KeyValue],
[`KeyWatcher`][jetstream_sync.KeyWatcher], [`CodecKeyValue`][jetstream_sync.CodecKeyValue] (keys and values
through codecs), and the [`KeyValueManager`][jetstream_sync.KeyValueManager] calls the
JetStream context has."""

from __future__ import annotations

from .bucket import KeyValue
from .manager import KeyValueManager
from .typed import CodecEntry, CodecKeyValue, CodecKeyWatcher
from .watch import KeyWatcher, WatchOptions

__all__ = [
    "CodecEntry",
    "CodecKeyValue",
    "CodecKeyWatcher",
    "KeyValue",
    "KeyValueManager",
    "KeyWatcher",
    "WatchOptions",
]
