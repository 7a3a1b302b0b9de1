"""Errors of partitioned consumer groups (``jetstream_sync.PartitionedGroups``), part of
[`jetstream_sync.errors`][jetstream_sync.errors].

They live here only so that errors.py stays under 700 lines: errors.py imports them all (and lists them in its
``__all__``), so ``errors.ConsumerGroupError`` is the name to use.
"""

from __future__ import annotations

from .errors import JetStreamError

__all__ = ["ConsumerGroupError", "ConsumerGroupExistsError", "ConsumerGroupNotFoundError"]


class ConsumerGroupError(JetStreamError):
    """A partitioned consumer group cannot be used as asked: its stored config is not valid JSON or breaks the
    group rules, it changed in a way its members cannot follow (partitions, filters), or a membership edit does
    not apply to it (adding members to a group that maps partitions by hand). The message says which group and
    what to do; bad arguments are InvalidArgumentError instead, raised before anything is sent."""


class ConsumerGroupNotFoundError(ConsumerGroupError):
    """No config for this group in the groups' KV bucket (``static-consumer-groups`` or
    ``elastic-consumer-groups``), or no such bucket yet: create the group first."""


class ConsumerGroupExistsError(ConsumerGroupError):
    """A group of this name exists on this stream with another config; creating it again with the same config
    is allowed (it returns the stored one). Delete it first to change partitions or filters."""
