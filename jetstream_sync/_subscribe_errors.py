"""The errors of ``js.subscribe`` and ``js.pull_subscribe`` refusing to bind (the ADR-15 checks), part of
[`jetstream_sync.errors`][jetstream_sync.errors].

They live here only so that errors.py stays under 700 lines: errors.py imports them all (and lists them in its
``__all__``), so ``errors.DuplicateSubscriptionError`` is the name to use; each class reports this module as its
own.
"""

from __future__ import annotations

from .errors import JetStreamError

__all__ = [
    "ConsumerConfigMismatchError",
    "ConsumerIsQueueBoundError",
    "ConsumerNotQueueError",
    "DeliverGroupMismatchError",
    "DuplicateSubscriptionError",
    "PullSubscribeRequiredError",
    "PullSubscribeToPushConsumerError",
    "QueueFlowControlError",
    "QueueHeartbeatError",
    "SubjectMismatchError",
    "SubscribeError",
]


class SubscribeError(JetStreamError, ValueError):
    """``js.subscribe`` / ``js.pull_subscribe`` cannot bind as asked (the ADR-15 checks); nothing was left
    subscribed or created. The subclass names the rule, the message says what to change."""


class DuplicateSubscriptionError(SubscribeError):
    """The push consumer is already bound to a subscriber and has no deliver group (ADR-15 push_bound)."""


class ConsumerIsQueueBoundError(SubscribeError):
    """A subscription without a queue for a consumer created for a queue group (deliver_group set)."""


class DeliverGroupMismatchError(SubscribeError):
    """A queue subscription whose queue is not the consumer's deliver_group."""


class ConsumerNotQueueError(SubscribeError):
    """A queue subscription for a consumer created without a deliver group."""


class SubjectMismatchError(SubscribeError):
    """The consumer's filter subject is not the subject given to subscribe."""


class PullSubscribeToPushConsumerError(SubscribeError):
    """``pull_subscribe`` on a push consumer (it has a deliver_subject)."""


class PullSubscribeRequiredError(SubscribeError):
    """``subscribe`` on a pull consumer (it has no deliver_subject): use ``pull_subscribe``."""


class ConsumerConfigMismatchError(SubscribeError):
    """The configuration given differs from the existing consumer's; subscribe does not update consumers."""


class QueueFlowControlError(SubscribeError):
    """Flow control over a queue group: the server would send flow control to a random member."""


class QueueHeartbeatError(SubscribeError):
    """Idle heartbeats over a queue group: the server would send heartbeats to a random member."""
