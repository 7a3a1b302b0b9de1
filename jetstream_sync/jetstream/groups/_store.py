"""The groups' configs in their KV buckets: read, write once, edit by compare-and-set, list, delete.

One job: the stored JSON under ``<stream>.<group>`` in ``static-consumer-groups`` or ``elastic-consumer-groups``
(orbit's buckets and keys, see ``_layout.py``). An edit reads the value and its revision and writes the new value
only if the revision is still the same (``KeyValue.update``), so two editors (two members adding themselves at
once, an operator's CLI) never lose each other's change: the loser reads again and reapplies its edit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import attrs

from ... import errors
from ...models import KeyValueConfig, KeyValueOp
from ..kv import KeyValue
from ._layout import ELASTIC_BUCKET, STATIC_BUCKET, config_key
from .config import ElasticGroupConfig, StaticGroupConfig

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["GroupStore"]

log = logging.getLogger("jetstream_sync")

_Config = TypeVar("_Config", StaticGroupConfig, ElasticGroupConfig)
#: how many times an edit is reapplied after losing a compare-and-set race before giving up
_EDIT_ATTEMPTS = 20


class GroupStore:
    """The stored configs of one kind of group (static or elastic) on one JetStream context."""

    def __init__(self, js: JetStream, elastic: bool) -> None:
        self.js = js
        self.elastic = elastic
        self.bucket_name = ELASTIC_BUCKET if elastic else STATIC_BUCKET
        self.kind = "elastic" if elastic else "static"

    def bucket(self, create_with_replicas: int | None = None) -> KeyValue:
        """The bucket; made (file storage, as orbit makes it) when ``create_with_replicas`` is given and it does
        not exist, else ConsumerGroupNotFoundError when it does not exist."""
        try:
            return self.js.key_value(self.bucket_name)
        except errors.BucketNotFoundError as exc:
            if create_with_replicas is None:
                raise errors.ConsumerGroupNotFoundError(
                    f"there is no {self.kind} consumer group yet (no KV bucket {self.bucket_name!r}); create one first"
                ) from exc
        try:
            return self.js.create_key_value(KeyValueConfig(bucket=self.bucket_name, replicas=create_with_replicas))
        except errors.BucketExistsError:  # made meanwhile by another creator
            return self.js.key_value(self.bucket_name)

    def _parse(self, raw: bytes, revision: int, what: str) -> StaticGroupConfig | ElasticGroupConfig:
        if self.elastic:
            return ElasticGroupConfig.from_json(raw, revision, what)
        return StaticGroupConfig.from_json(raw, what)

    def read(
        self, stream: str, group: str, kv: KeyValue | None = None
    ) -> tuple[StaticGroupConfig | ElasticGroupConfig, int]:
        """The group's config and its revision; ConsumerGroupNotFoundError when there is none."""
        kv = kv or self.bucket()
        key = config_key(stream, group)
        try:
            entry = kv.get(key)
        except errors.KeyNotFoundError as exc:  # KeyDeletedError too
            raise errors.ConsumerGroupNotFoundError(
                f"no {self.kind} consumer group {group!r} on stream {stream!r} (no key {key!r} in {self.bucket_name!r})"
            ) from exc
        what = f"{self.kind} consumer group {key}"
        return self._parse(entry.value, entry.revision, what), entry.revision

    def create(self, stream: str, group: str, config: _Config, replicas: int) -> _Config:
        """Store ``config`` unless the group exists: then return the stored one if it has the same layout,
        else raise ConsumerGroupExistsError."""
        kv = self.bucket(create_with_replicas=replicas)
        key = config_key(stream, group)
        try:
            revision = kv.create(key, config.to_json())
        except errors.KeyExistsError:
            stored, _revision = self.read(stream, group, kv)
            if not _same_definition(stored, config):
                raise errors.ConsumerGroupExistsError(
                    f"{self.kind} consumer group {group!r} on stream {stream!r} exists with another config "
                    f"({stored.to_json().decode()}); delete it first to change it"
                ) from None
            return stored  # type: ignore[return-value]
        if isinstance(config, ElasticGroupConfig):
            return attrs.evolve(config, revision=revision)
        return config

    def edit(
        self, stream: str, group: str, change: Callable[[ElasticGroupConfig], ElasticGroupConfig | None]
    ) -> ElasticGroupConfig:
        """Apply ``change`` to the stored elastic config by compare-and-set, again on a fresh read when another
        writer got in first; ``change`` returns None when there is nothing to write."""
        kv = self.bucket()
        key = config_key(stream, group)
        for _attempt in range(_EDIT_ATTEMPTS):
            current, revision = self.read(stream, group, kv)
            assert isinstance(current, ElasticGroupConfig)
            changed = change(current)
            if changed is None:
                return current
            changed.check()
            try:
                new_revision = kv.update(key, changed.to_json(), revision)
            except errors.KeyWrongLastSequenceError:
                log.debug("consumer group %s: the config changed while editing it; reading it again", key)
                continue
            return attrs.evolve(changed, revision=new_revision)
        raise errors.ConsumerGroupError(
            f"consumer group {key}: the config kept changing while editing it ({_EDIT_ATTEMPTS} attempts); try again"
        )

    def groups(self, stream: str) -> list[str]:
        """The names of this kind's groups on ``stream`` (none when the bucket does not exist)."""
        try:
            kv = self.bucket()
        except errors.ConsumerGroupNotFoundError:
            return []
        names = []
        for key in kv.keys():  # noqa: SIM118 - a bucket, not a dict
            head, _dot, rest = key.partition(".")
            if head == stream and rest:
                names.append(rest.split(".")[0])
        return sorted(names)

    def delete(self, stream: str, group: str) -> None:
        """Put a delete marker on the group's key (members watching it stop); no error when there is none."""
        try:
            kv = self.bucket()
        except errors.ConsumerGroupNotFoundError:
            return
        try:
            kv.delete(config_key(stream, group))
        except errors.KeyNotFoundError:
            return

    @staticmethod
    def is_deletion(operation: KeyValueOp) -> bool:
        """A watched entry that removes the group (a delete or purge marker)."""
        return operation is not KeyValueOp.PUT


def _same_definition(
    stored: StaticGroupConfig | ElasticGroupConfig, wanted: StaticGroupConfig | ElasticGroupConfig
) -> bool:
    """orbit's test for "creating it again is fine": a static group must match in full, an elastic one in its
    layout (its membership is edited separately)."""
    if isinstance(stored, ElasticGroupConfig) and isinstance(wanted, ElasticGroupConfig):
        return stored.same_layout(wanted)
    return stored.to_json() == wanted.to_json()
