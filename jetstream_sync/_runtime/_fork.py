"""Fork detection for everything a client makes.

A forked child inherits copies of its parent's clients and of all they made (subscriptions, iterators, consume
contexts, watchers) but none of their threads: an inherited iterator would hand out copies of messages the
parent also gets, then wait for ever, and a lock a parent thread held at fork time stays held. So each such
object keeps a :class:`ForkGuard` made when it was, and every public entry point checks it first: in a child
it raises ForkedClientError before touching a lock or a buffer. Objects made in the child (a new client) are of
the child's own generation and work normally.
"""

from __future__ import annotations

import os

from .. import errors

__all__ = ["ForkGuard"]

_generation = 0  # how many forks lie between the first process and this one


def _forked() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class ForkGuard:
    """Remembers the process generation an object was made in."""

    __slots__ = ("_born",)

    def __init__(self) -> None:
        self._born = _generation

    @property
    def inherited(self) -> bool:
        """True in a process forked after the object was made."""
        return self._born != _generation

    def check(self) -> None:
        """Raise ForkedClientError in a process forked after the object was made."""
        if self._born != _generation:
            raise errors.ForkedClientError()
