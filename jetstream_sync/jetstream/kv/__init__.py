"""Key-value buckets (ADR-8) on JetStream streams: :class:`KeyValue`, :class:`KeyWatcher`, and the
:class:`KeyValueManager` calls the JetStream context has."""

from __future__ import annotations

from .bucket import KeyValue
from .manager import KeyValueManager
from .watch import KeyWatcher, WatchOptions

__all__ = ["KeyValue", "KeyValueManager", "KeyWatcher", "WatchOptions"]
