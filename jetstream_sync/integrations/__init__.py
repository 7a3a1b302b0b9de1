"""Framework glue: one home for everything that adapts the client to another framework's lifecycle.

``spark/`` (PySpark data source) today; Flask, Django, Celery and OpenTelemetry go beside it. They
share two things (docs/ARCHITECTURE.md, "Where the next features go"):

- :class:`ConnectionSettings` (``_connection.py``): how to connect, as hashable, picklable values, read from a
  framework's settings dict by :meth:`ConnectionSettings.from_mapping` (keys :data:`SETTING_KEYS`), with the
  one ``connect()`` every integration uses;
- :func:`process_client` (``_clients.py``): the process-aware client cache. A client is made on first use in
  the process that uses it, a forked child (gunicorn, uWSGI, Celery prefork, Spark workers) gets its own and
  never the parent's, and :func:`close_process_clients` runs at exit.
"""

from ._clients import close_process_clients, process_client
from ._connection import SETTING_KEYS, ConnectionSettings

__all__ = ["SETTING_KEYS", "ConnectionSettings", "close_process_clients", "process_client"]
