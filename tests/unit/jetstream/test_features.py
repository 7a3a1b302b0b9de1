"""The server version check behind calls that need a newer nats-server."""

from __future__ import annotations

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream._features import require_server, server_version


@pytest.mark.parametrize(
    ("text", "version"),
    [("2.15.1", (2, 15, 1)), ("2.11.0-RC.2", (2, 11, 0)), ("v2.10.22", (2, 10, 22)), ("", None), ("dev", None)],
)
def test_the_server_version_is_read_from_info(text, version):
    assert server_version({"version": text}) == version


def test_an_older_server_is_refused_naming_both_versions():
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        require_server({"version": "2.10.22"}, "pausing a consumer", (2, 11, 0))
    assert str(info.value) == "pausing a consumer needs nats-server 2.11.0 or later; this server is 2.10.22"
    assert (info.value.needed, info.value.server) == ("2.11.0", "2.10.22")


@pytest.mark.parametrize("text", ["2.11.0", "2.15.1", "3.0.0", "unknown"])
def test_a_new_enough_or_unknown_server_is_left_to_answer(text):
    require_server({"version": text}, "pausing a consumer", (2, 11, 0))
