"""The not-found errors of streams, consumers, buckets and stored messages, part of
[`jetstream_sync.errors`][jetstream_sync.errors]: each names what was not found and, where it can be made, how
to create it.

The server's error says only "stream not found" (err_code 10059) or "consumer not found" (10014); the client
knows the name it asked for, from the API subject the request went to (`named_by_subject`, applied to
every JetStream API error) or from the call's arguments. The classes live here only so that errors.py stays
under 700 lines: errors.py imports them (and lists them in its ``__all__``), so ``errors.StreamNotFoundError``
is the name to use; each reports that module as its own.
"""

from __future__ import annotations

from typing import Any

from .errors import APIError, KeyValueError, ObjectStoreError

__all__ = [
    "BucketNotFoundError",
    "ConsumerNotFoundError",
    "MessageNotFoundError",
    "StreamNotFoundError",
    "named_by_subject",
]

#: API subject tokens (after ``API.CONSUMER.``) of operations named by two tokens, before the stream's name
_TWO_TOKEN_CONSUMER_OPS = frozenset({"DURABLE", "MSG", "LEADER"})
#: the prefixes of the streams that hold key-value and object-store buckets
_KV_PREFIX, _OBJ_PREFIX = "KV_", "OBJ_"


def _codes(exc: APIError) -> str:
    return f"code={exc.code}, err_code={exc.err_code}"


class StreamNotFoundError(APIError):
    """The stream does not exist. ``stream`` names it when the client knows which (None, e.g., when no stream
    captures a subject); the message then says how to create it."""

    def __init__(self, code: int, err_code: int, description: str, stream: str | None = None) -> None:
        super().__init__(code, err_code, description)
        #: the name of the stream that was not found; None when the request named none
        self.stream = stream
        if stream is not None and type(self) is StreamNotFoundError:
            self.args = (
                f"stream {stream!r} not found; create it with "
                f"js.create_stream(StreamConfig(name={stream!r}, subjects=[...])) ({description}, {_codes(self)})",
            )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.err_code, self.description, self.stream))


class ConsumerNotFoundError(APIError):
    """The consumer does not exist (err_code 10014; 10149 to an update). ``stream`` and ``consumer`` name it
    when the client knows them; the message then says how to create it (a push consumer, with a deliver
    subject, when ``push``: what a push subscription binds to)."""

    def __init__(
        self,
        code: int,
        err_code: int,
        description: str,
        stream: str | None = None,
        consumer: str | None = None,
        *,
        push: bool = False,
    ) -> None:
        super().__init__(code, err_code, description)
        #: the stream the consumer was looked for on; None when not known
        self.stream = stream
        #: the consumer's name; None when not known (e.g. a subscription whose consumer is gone)
        self.consumer = consumer
        self._push = push
        if consumer is not None:
            where = f" on stream {stream!r}" if stream is not None else ""
            if push:
                create = "js.create_push_consumer"
                config = f"ConsumerConfig(durable_name={consumer!r}, deliver_subject=...)"
            else:
                create = "js.create_consumer"
                config = f"ConsumerConfig(durable_name={consumer!r})"
            how = f"{create}({stream!r}, {config})" if stream is not None else f"{create}(stream, {config})"
            self.args = (
                f"consumer {consumer!r} not found{where}; create it with {how} ({description}, {_codes(self)})",
            )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _consumer_not_found,
            (type(self), self.code, self.err_code, self.description, self.stream, self.consumer, self._push),
        )


class MessageNotFoundError(APIError):
    """No message at that sequence or for that subject (err_code 10037; 10043 to a delete of a sequence not
    there). ``stream``, ``sequence`` and ``subject`` say what was asked for when the client knows it (a
    `Stream.get_msg` or `get_last_msg`); the message then names them, as the server's "no message found" does not.
    """

    def __init__(
        self,
        code: int,
        err_code: int,
        description: str,
        stream: str | None = None,
        sequence: int | None = None,
        subject: str | None = None,
    ) -> None:
        super().__init__(code, err_code, description)
        #: the stream that was read; None when not known
        self.stream = stream
        #: the sequence asked for (with ``subject``: the first message at or after it); None for a last-by-subject
        self.sequence = sequence
        #: the subject asked for (wildcards allowed); None for a read by sequence alone
        self.subject = subject
        if stream is not None:
            if subject is None:
                what = f"at sequence {sequence}"
            elif sequence is None:
                what = f"on subject {subject!r}"
            else:
                what = f"on subject {subject!r} at or after sequence {sequence}"
            self.args = (f"no message in stream {stream!r} {what} ({description}, {_codes(self)})",)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.code, self.err_code, self.description, self.stream, self.sequence, self.subject),
        )


class BucketNotFoundError(KeyValueError, ObjectStoreError, StreamNotFoundError):
    """The bucket's stream (``KV_<bucket>`` or ``OBJ_<bucket>``) does not exist; create the bucket first.

    Raised by both stores, so it is both a [`KeyValueError`][jetstream_sync.errors.KeyValueError] and an
    [`ObjectStoreError`][jetstream_sync.errors.ObjectStoreError], and a
    [`StreamNotFoundError`][jetstream_sync.errors.StreamNotFoundError] because that is what the server said. ``bucket``
    names it and ``stream`` is its stream when known; the message says how to create it (with the store's call, known
    from the stream's prefix).
    """

    def __init__(
        self, code: int, err_code: int, description: str, stream: str | None = None, bucket: str | None = None
    ) -> None:
        super().__init__(code, err_code, description, stream)
        if bucket is None and stream is not None:
            bucket = stream.removeprefix(_KV_PREFIX) if stream.startswith(_KV_PREFIX) else None
            bucket = bucket or (stream.removeprefix(_OBJ_PREFIX) if stream.startswith(_OBJ_PREFIX) else None)
        #: the bucket's name; None when not known
        self.bucket = bucket
        if bucket is not None:
            kv = f"js.create_key_value(KeyValueConfig(bucket={bucket!r}))"
            obj = f"js.create_object_store(ObjectStoreConfig(bucket={bucket!r}))"
            kind = (stream or "")[: (stream or "").find("_") + 1]
            how = {_KV_PREFIX: kv, _OBJ_PREFIX: obj}.get(kind, f"{kv} or {obj}")
            self.args = (f"{description}; create it with {how} ({_codes(self)})",)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.err_code, self.description, self.stream, self.bucket))


def named_by_subject(exc: APIError, subject: str) -> APIError:
    """``exc`` naming the stream (and consumer) of the API request it answers, when it is a plain
    StreamNotFoundError or ConsumerNotFoundError that names none; otherwise ``exc`` itself.

    ``subject`` is the request's: ``$JS.API.STREAM.INFO.<stream>``, ``$JS.API.CONSUMER.INFO.<stream>.<name>``,
    ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<name>``, ``$JS.API.DIRECT.GET.<stream>``, a domain's ``$JS.<domain>.API``
    alike. Stream and consumer names hold no ``.``, so their tokens are theirs alone."""
    if type(exc) not in (StreamNotFoundError, ConsumerNotFoundError):
        return exc
    tokens = subject.split(".")
    if "API" not in tokens:
        return exc
    rest = tokens[tokens.index("API") + 1 :]
    names: list[str] = []
    if rest[:1] == ["STREAM"] and len(rest) >= 3:
        names = rest[-1:]
    elif rest[:1] == ["DIRECT"] and len(rest) >= 3:
        names = rest[2:3]
    elif rest[:1] == ["CONSUMER"] and len(rest) >= 3:
        names = rest[(3 if rest[1] in _TWO_TOKEN_CONSUMER_OPS else 2) :][:2]
    if not names or not names[0]:
        return exc
    if isinstance(exc, StreamNotFoundError):
        named: APIError = StreamNotFoundError(exc.code, exc.err_code, exc.description, names[0])
    elif len(names) < 2:
        return exc
    else:
        named = ConsumerNotFoundError(exc.code, exc.err_code, exc.description, names[0], names[1])
    return named


for _name in (
    "BucketNotFoundError",
    "ConsumerNotFoundError",
    "MessageNotFoundError",
    "StreamNotFoundError",
):  # as _api_errors does
    globals()[_name].__module__ = "jetstream_sync.errors"


def _consumer_not_found(
    cls: type[ConsumerNotFoundError],
    code: int,
    err_code: int,
    description: str,
    stream: str | None,
    consumer: str | None,
    push: bool,
) -> ConsumerNotFoundError:
    """Unpickling a ConsumerNotFoundError (its ``push`` is keyword-only)."""
    return cls(code, err_code, description, stream, consumer, push=push)
