"""Key-value buckets (ADR-8) on JetStream streams: [`KeyValue`][jetstream_sync.KeyValue],
[`KeyWatcher`][jetstream_sync.KeyWatcher], and the [`KeyValueManager`][jetstream_sync.KeyValueManager] calls the
JetStream context has."""

from __future__ import annotations

from .bucket import KeyValue
from .manager import KeyValueManager
from .watch import KeyWatcher, WatchOptions

__all__ = ["KeyValue", "KeyValueManager", "KeyWatcher", "WatchOptions"]
