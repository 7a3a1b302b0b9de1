"""Object stores (ADR-20) on JetStream streams: [`ObjectStore`][jetstream_sync.ObjectStore],
[`ObjectReader`][jetstream_sync.ObjectReader], [`ObjectWatcher`][jetstream_sync.ObjectWatcher], and the
[`ObjectStoreManager`][jetstream_sync.ObjectStoreManager] calls the JetStream context has.

One module per job: ``_meta`` (the wire format), ``_source`` (what ``put`` reads, cut into chunks),
``_upload`` (the windowed chunk publish), ``_files`` (``get_file``'s temporary file and rename), ``reader``,
``watch``, ``store`` (the bucket handle) and ``manager`` (the bucket calls of the context).
"""

from __future__ import annotations

from ._source import ObjectData
from .manager import ObjectStoreManager
from .reader import ObjectReader
from .store import ObjectStore
from .watch import ObjectWatcher

__all__ = ["ObjectData", "ObjectReader", "ObjectStore", "ObjectStoreManager", "ObjectWatcher"]
