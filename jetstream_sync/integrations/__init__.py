"""Framework glue: one home for everything that adapts the client to another framework's lifecycle.

``spark/`` (PySpark data source) today; Flask, Django, Celery and OpenTelemetry go beside it. They
share two things (docs/ARCHITECTURE.md, "Where the next features go"):

- [`ConnectionSettings`][jetstream_sync.integrations.ConnectionSettings] (``_connection.py``): how to connect, as
  hashable, picklable values, read from a framework's settings dict by
  [`ConnectionSettings.from_mapping`][jetstream_sync.integrations.ConnectionSettings.from_mapping] (keys
  `SETTING_KEYS`), with the one ``connect()`` every integration uses;
- [`process_client`][jetstream_sync.integrations.process_client] (``_clients.py``): the process-aware client cache. A
  client is made on first use in the process that uses it, a forked child (gunicorn, uWSGI, Celery prefork, Spark
  workers) gets its own and never the parent's, and
  [`close_process_clients`][jetstream_sync.integrations.close_process_clients] runs at exit.
"""

from ._clients import close_process_clients, process_client
from ._connection import SETTING_KEYS, ConnectionSettings

__all__ = ["SETTING_KEYS", "ConnectionSettings", "close_process_clients", "process_client"]
