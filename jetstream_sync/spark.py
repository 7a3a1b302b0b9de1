"""PySpark data source: the public home of [`jetstream_sync.integrations.spark`][jetstream_sync.integrations.spark]
(``format("jetstream")``).

See that module for the options; ``from jetstream_sync.spark import JetStreamDataSource`` keeps working.
"""

from __future__ import annotations

from .integrations.spark import *  # noqa: F403 - this module is the package's public alias
from .integrations.spark import __all__ as __all__  # noqa: PLC0414 - re-exported on purpose
