"""Account types: what ``$JS.API.INFO`` reports about the account's JetStream usage, limits and API calls.

``tiers`` (usage per replica tier, on servers with tiered limits) is kept as the server's dict.
"""

from __future__ import annotations

from typing import Any

import attrs

from ._base import _meta, _Model

__all__ = ["APIStats", "AccountInfo", "AccountLimits"]


@attrs.frozen(kw_only=True)
class AccountLimits(_Model):
    """-1 means unlimited."""

    max_memory: int = 0
    max_storage: int = 0
    max_streams: int = 0
    max_consumers: int = 0
    max_ack_pending: int = 0
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0
    max_bytes_required: bool = False


@attrs.frozen(kw_only=True)
class APIStats(_Model):
    """The account's JetStream API request counts: ``total`` requests and ``errors`` among them; and ``level``,
    the JetStream API level of the server that answered (ADR-44: 1 for nats-server 2.11, 2 for 2.12, 4 for 2.14,
    5 for 2.15; 0 from a server older than 2.11, which does not report one)."""

    level: int = 0
    total: int = 0
    errors: int = 0


@attrs.frozen(kw_only=True)
class AccountInfo(_Model):
    """The account's JetStream usage and limits, from ``js.account_info()``: memory and storage used and reserved,
    stream and consumer counts, ``limits``, ``domain``, ``api`` request counts and the per-tier figures."""

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = attrs.field(factory=AccountLimits, metadata=_meta("model", model=AccountLimits))
    domain: str | None = None
    api: APIStats = attrs.field(factory=APIStats, metadata=_meta("model", model=APIStats))
    tiers: dict[str, Any] | None = None
