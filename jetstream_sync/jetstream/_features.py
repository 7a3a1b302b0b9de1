"""Which nats-server a call needs, checked against the connected server's INFO before anything is sent.

An older server answers a newer API with a timeout or a generic error; this says what is missing instead.
A server whose version cannot be read is left to answer for itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .. import errors

__all__ = ["require_server", "server_version"]

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def server_version(info: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """The server's version from its INFO ("2.11.0-RC.2" is 2.11.0), or None when it does not say."""
    match = _VERSION.match(str(info.get("version", "")))
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def require_server(info: Mapping[str, Any], feature: str, needed: tuple[int, int, int]) -> None:
    """Raise FeatureNotSupportedError when the server is older than ``needed``."""
    version = server_version(info)
    if version is not None and version < needed:
        raise errors.FeatureNotSupportedError(feature, ".".join(map(str, needed)), str(info.get("version")))
