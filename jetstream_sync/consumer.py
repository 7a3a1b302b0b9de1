"""Consumer: a handle on one consumer, its info, and (with pull consumers) the ways to read messages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .models import ConsumerInfo

if TYPE_CHECKING:
    from .jetstream import JetStream

__all__ = ["Consumer"]


class Consumer:
    """A handle on one consumer. ``cached_info`` is what the last call saw; ``info()`` asks the server."""

    def __init__(self, js: JetStream, info: ConsumerInfo) -> None:
        self._js = js
        self.stream_name: str = info.stream_name
        self.name: str = info.name
        self.cached_info = info

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"

    def info(self) -> ConsumerInfo:
        self.cached_info = self._js.consumer_info(self.stream_name, self.name)
        return self.cached_info

    def delete(self) -> None:
        self._js.delete_consumer(self.stream_name, self.name)
