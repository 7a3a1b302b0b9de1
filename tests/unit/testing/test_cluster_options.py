"""EmbeddedCluster's fsync option is checked before anything is made or started."""

from __future__ import annotations

import pytest

from jetstream_sync.errors import InvalidArgumentError
from jetstream_sync.testing import EmbeddedCluster


@pytest.mark.parametrize("value", ["sometimes", "10", "2 m", ""])
def test_a_sync_interval_nats_server_would_not_take_is_refused(value):
    with pytest.raises(InvalidArgumentError, match="sync_interval"):
        EmbeddedCluster(size=3, sync_interval=value)


def test_a_sync_interval_beside_a_jetstream_block_of_the_config_is_refused():
    """A second jetstream block would replace the first one (nats-server keeps the last value of a key)."""
    with pytest.raises(InvalidArgumentError, match="inside it"):
        EmbeddedCluster(size=3, config="jetstream {\n  max_memory_store: 1GB\n}", sync_interval="always")
