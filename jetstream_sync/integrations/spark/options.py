"""The data source's options: Spark hands over strings; these classes check them and keep typed, picklable values.

Everything is validated on the driver side, when the reader or writer is created, so a bad option fails the
query before anything is sent, with an InvalidArgumentError (or InvalidTypeError) naming the option. Option
names are case-insensitive, as everywhere in Spark.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import ClassVar, Literal

import attrs

from ... import errors
from ..._validate import check_name, check_subject
from ...models import parse_time
from ...options import parse_servers
from .._connection import ConnectionSettings, redacted

__all__ = [
    "ConnectionOptions",
    "ReadOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
    "redacted",
]

log = logging.getLogger("jetstream_sync.spark")

ReadMode = Literal["auto", "direct", "consumer"]
StartingTimeStrategy = Literal["latest", "error"]
Start = int | Literal["earliest", "latest"]

_CONNECTION_KEYS = (
    "servers",
    "name",
    "user",
    "password",
    "token",
    "credentials",
    "nkeySeedFile",
    "tlsCaFile",
    "tlsCertFile",
    "tlsKeyFile",
    "tlsHostname",
    "connectTimeout",
    "timeout",
)
_READ_KEYS = (
    "stream",
    "subjects",
    "startingSequence",
    "startingTime",
    "startingTimeStrategy",
    "endingSequence",
    "endingTime",
    "maxMessagesPerTrigger",
    "maxBytesPerTrigger",
    "minMessagesPerTrigger",
    "maxTriggerDelay",
    "pollInterval",
    "progressConsumer",
    "numPartitions",
    "minPartitionSize",
    "failOnDataLoss",
    "readMode",
    "fetchBatchSize",
    "fetchMaxBytes",
)
_WRITE_KEYS = ("subject", "msgIdColumn", "idempotent", "maxInFlight", "publishTimeout")
# Options Spark itself sets or passes through: never worth a warning.
_SPARK_KEYS = frozenset({"path", "checkpointlocation", "queryname", "__dsv2_tags"})

DEFAULT_NUM_PARTITIONS = 4
DEFAULT_MIN_PARTITION_SIZE = 10_000
DEFAULT_FETCH_BATCH_SIZE = 5_000
DEFAULT_FETCH_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT = 4_000
#: the least time between two asks for the stream's end: an idle query makes at most 1/this STREAM.INFO a second
DEFAULT_POLL_INTERVAL = 0.25
DEFAULT_MAX_TRIGGER_DELAY = 15 * 60.0  # Kafka's maxTriggerDelay default
# The server keeps times as int64 nanoseconds since 1970: later times overflow and select the wrong message.
_EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LATEST_TIME = datetime(2262, 4, 11, tzinfo=timezone.utc)


@attrs.frozen(kw_only=True)
class ConnectionOptions(ConnectionSettings):
    """How executors connect: the integrations' ConnectionSettings, with Spark's default client name and its
    camelCase option names in errors (``tlsCaFile: file ... does not exist on this machine``). Hashable: it
    keys the per-process client cache; picklable: only it travels to the executors, never a client."""

    option_names: ClassVar[Mapping[str, str]] = {
        "servers": "servers",
        "nkey_seed_file": "nkeySeedFile",
        "tls_ca_file": "tlsCaFile",
        "tls_cert_file": "tlsCertFile",
        "tls_key_file": "tlsKeyFile",
        "tls_hostname": "tlsHostname",
        "connect_timeout": "connectTimeout",
    }

    name: str | None = "jetstream-sync-spark"


@attrs.frozen(kw_only=True)
class ReadOptions:
    """A validated read (batch or streaming). Sequences are inclusive; ``None`` means "not set"."""

    connection: ConnectionOptions
    stream: str
    #: every stream of the option ``stream`` (comma-separated); ``stream`` is the first, and the one a
    #: single-stream reader reads
    streams: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    starting_sequence: Start
    starting_time: datetime | None = None
    starting_time_strategy: StartingTimeStrategy = "latest"
    ending_sequence: int | Literal["latest"] | None = None
    ending_time: datetime | None = None
    max_messages_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    min_messages_per_trigger: int | None = None
    max_trigger_delay: float = DEFAULT_MAX_TRIGGER_DELAY
    poll_interval: float = DEFAULT_POLL_INTERVAL
    progress_consumer: str | None = None
    num_partitions: int = DEFAULT_NUM_PARTITIONS
    min_partition_size: int = DEFAULT_MIN_PARTITION_SIZE
    fail_on_data_loss: bool = True
    read_mode: ReadMode = "auto"
    fetch_batch_size: int = DEFAULT_FETCH_BATCH_SIZE
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES

    def each_stream(self) -> list[ReadOptions]:
        """These options once per stream of ``streams``, each reading that one stream."""
        return [attrs.evolve(self, stream=name, streams=(name,)) for name in self.streams or (self.stream,)]

    def for_stream(self, name: str) -> ReadOptions:
        """These options reading stream ``name`` (one of ``streams``)."""
        return (
            self if name == self.stream and len(self.streams) <= 1 else attrs.evolve(self, stream=name, streams=(name,))
        )


@attrs.frozen(kw_only=True)
class WriteOptions:
    """A validated write. ``subject`` is the default subject for a DataFrame without a ``subject`` column."""

    connection: ConnectionOptions
    subject: str | None = None
    msg_id_column: str | None = None
    idempotent: bool = True
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    publish_timeout: float = 10.0


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(value, str):
            raise errors.InvalidTypeError(key, f"must be a string option, got {type(value).__name__}")
        out[key.lower()] = value
    return out


def _warn_unknown(options: dict[str, str], known: tuple[str, ...], what: str) -> None:
    names = {k.lower() for k in known}
    for key in sorted(set(options) - names - _SPARK_KEYS):
        log.warning("jetstream %s: ignoring unknown option %r (known: %s)", what, key, ", ".join(known))


def _text(options: dict[str, str], name: str, *, strip: bool = True) -> str | None:
    value = options.get(name.lower())
    if value is None:
        return None
    value = value.strip() if strip else value
    if not value:
        raise errors.InvalidArgumentError(name, "must not be empty")
    return value


def _int(options: dict[str, str], name: str, default: int, minimum: int = 1) -> int:
    text = _text(options, name)
    if text is None:
        return default
    try:
        number = int(text.replace("_", ""))
    except ValueError:
        raise errors.InvalidArgumentError(name, f"must be a whole number, got {text!r}") from None
    if number < minimum:
        raise errors.InvalidArgumentError(name, f"must be >= {minimum}, got {number}")
    return number


def _seconds(options: dict[str, str], name: str, default: float, *, zero: bool = False) -> float:
    text = _text(options, name)
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        raise errors.InvalidArgumentError(name, f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        kind = "a number of seconds >= 0" if zero else "a positive number of seconds"
        raise errors.InvalidArgumentError(name, f"must be {kind}, got {text!r}")
    return seconds


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    text = _text(options, name)
    if text is None:
        return default
    lowered = text.lower()
    if lowered in {"true", "1", "yes"}:
        return True
    if lowered in {"false", "0", "no"}:
        return False
    raise errors.InvalidArgumentError(name, f"must be true or false, got {text!r}")


def _connection(options: dict[str, str]) -> ConnectionOptions:
    servers_text = _text(options, "servers")
    if servers_text is None:
        raise errors.InvalidArgumentError("servers", "is required: the NATS URL(s), e.g. nats://127.0.0.1:4222")
    servers = parse_servers("servers", servers_text)
    user, password = _text(options, "user"), _text(options, "password", strip=False)
    if password is not None and user is None:
        raise errors.InvalidArgumentError("password", "given without user")
    cert, key = _text(options, "tlsCertFile"), _text(options, "tlsKeyFile")
    if key is not None and cert is None:
        raise errors.InvalidArgumentError("tlsKeyFile", "given without tlsCertFile")
    return ConnectionOptions(
        servers=servers,
        name=_text(options, "name") or "jetstream-sync-spark",
        user=user,
        password=password,
        token=_text(options, "token", strip=False),
        credentials=_text(options, "credentials"),
        nkey_seed_file=_text(options, "nkeySeedFile"),
        tls_ca_file=_text(options, "tlsCaFile"),
        tls_cert_file=cert,
        tls_key_file=key,
        tls_hostname=_text(options, "tlsHostname"),
        connect_timeout=_seconds(options, "connectTimeout", 5.0),
        timeout=_seconds(options, "timeout", 10.0),
    )


def _sequence(options: dict[str, str], name: str, words: tuple[str, ...]) -> int | str | None:
    text = _text(options, name)
    if text is None:
        return None
    if text.lower() in words:
        return text.lower()
    try:
        number = int(text.replace("_", ""))
    except ValueError:
        raise errors.InvalidArgumentError(
            name, f"must be {', '.join(words)} or a sequence number, got {text!r}"
        ) from None
    if number < 1:
        raise errors.InvalidArgumentError(name, f"sequences start at 1, got {number}")
    return number


def _time(options: dict[str, str], name: str) -> datetime | None:
    text = _text(options, name)
    if text is None:
        return None
    moment: datetime | None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        moment = parse_time(text)  # RFC 3339 with nanoseconds, as the server writes it
    if moment is None:
        raise errors.InvalidArgumentError(
            name, f"must be an ISO 8601 timestamp such as 2025-01-31T12:00:00Z, got {text!r}"
        )
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)  # naive means UTC
    if not _EARLIEST_TIME <= moment <= _LATEST_TIME:
        raise errors.InvalidArgumentError(
            name, f"must lie between 1970 and 2262 (server time in nanoseconds), got {text!r}"
        )
    return moment


def parse_read_options(raw: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check the options of ``spark.read`` / ``spark.readStream``; the error names the option at fault."""
    options = _lower(raw)
    _warn_unknown(options, _CONNECTION_KEYS + _READ_KEYS, "read")
    connection = _connection(options)
    stream_text = _text(options, "stream") or _text(options, "path")
    if stream_text is None:
        raise errors.InvalidArgumentError("stream", "is required: the name of the stream to read")
    streams = tuple(dict.fromkeys(name.strip() for name in stream_text.split(",") if name.strip()))
    if not streams:
        raise errors.InvalidArgumentError("stream", f"must name at least one stream, got {stream_text!r}")
    for name in streams:
        check_name("stream", name)
    stream = streams[0]
    subjects_text = _text(options, "subjects")
    subjects: tuple[str, ...] = ()
    if subjects_text is not None:
        subjects = tuple(
            check_subject("subjects", s.strip(), wildcards=True) for s in subjects_text.split(",") if s.strip()
        )
    starting = _sequence(options, "startingSequence", ("earliest", "latest"))
    starting_time = _time(options, "startingTime")
    if starting is not None and starting_time is not None:
        raise errors.InvalidArgumentError("startingTime", "cannot be combined with startingSequence; set one")
    strategy = (_text(options, "startingTimeStrategy") or "latest").lower()
    if strategy not in {"latest", "error"}:
        raise errors.InvalidArgumentError("startingTimeStrategy", f"must be latest or error, got {strategy!r}")
    ending = _sequence(options, "endingSequence", ("latest",))
    ending_time = _time(options, "endingTime")
    for name, value in (("endingSequence", ending), ("endingTime", ending_time)):
        if streaming and value is not None:
            raise errors.InvalidArgumentError(name, "is for batch reads; a streaming query has no end")
    if ending is not None and ending_time is not None:
        raise errors.InvalidArgumentError("endingTime", "cannot be combined with endingSequence; set one")
    if isinstance(ending, int) and isinstance(starting, int) and ending < starting:
        raise errors.InvalidArgumentError("endingSequence", f"{ending} is below startingSequence {starting}")
    if ending_time is not None and starting_time is not None and ending_time < starting_time:
        raise errors.InvalidArgumentError("endingTime", f"{ending_time} is before startingTime {starting_time}")
    per_trigger = {
        name: _int(options, name, 0) if _text(options, name) is not None else None
        for name in ("maxMessagesPerTrigger", "maxBytesPerTrigger", "minMessagesPerTrigger")
    }
    for name in (*per_trigger, "maxTriggerDelay", "pollInterval", "progressConsumer"):
        if not streaming and _text(options, name) is not None:
            raise errors.InvalidArgumentError(name, "is for streaming reads (readStream)")
    max_per_trigger, min_per_trigger = per_trigger["maxMessagesPerTrigger"], per_trigger["minMessagesPerTrigger"]
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise errors.InvalidArgumentError(
            "minMessagesPerTrigger", f"{min_per_trigger} is above maxMessagesPerTrigger {max_per_trigger}"
        )
    if min_per_trigger is None and _text(options, "maxTriggerDelay") is not None:
        raise errors.InvalidArgumentError("maxTriggerDelay", "bounds the wait of minMessagesPerTrigger: set that too")
    progress = _text(options, "progressConsumer")
    if progress is not None:
        check_name("progressConsumer", progress)
    mode = (_text(options, "readMode") or "auto").lower()
    if mode not in {"auto", "direct", "consumer"}:
        raise errors.InvalidArgumentError("readMode", f"must be auto, direct or consumer, got {mode!r}")
    # Kafka's defaults: a streaming query starts at the end, a batch read at the beginning.
    default_start: Start = "latest" if streaming else "earliest"
    return ReadOptions(
        connection=connection,
        stream=stream,
        streams=streams,
        subjects=subjects,
        starting_sequence=default_start if starting is None else starting,  # type: ignore[arg-type]
        starting_time=starting_time,
        starting_time_strategy=strategy,  # type: ignore[arg-type]
        ending_sequence=("latest" if not streaming and ending_time is None else None) if ending is None else ending,  # type: ignore[arg-type]
        ending_time=ending_time,
        max_messages_per_trigger=max_per_trigger,
        max_bytes_per_trigger=per_trigger["maxBytesPerTrigger"],
        min_messages_per_trigger=min_per_trigger,
        max_trigger_delay=_seconds(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY),
        poll_interval=_seconds(options, "pollInterval", DEFAULT_POLL_INTERVAL, zero=True),
        progress_consumer=progress,
        num_partitions=_int(options, "numPartitions", DEFAULT_NUM_PARTITIONS),
        min_partition_size=_int(options, "minPartitionSize", DEFAULT_MIN_PARTITION_SIZE),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        read_mode=mode,  # type: ignore[arg-type]
        fetch_batch_size=_int(options, "fetchBatchSize", DEFAULT_FETCH_BATCH_SIZE),
        fetch_max_bytes=_int(options, "fetchMaxBytes", DEFAULT_FETCH_MAX_BYTES),
    )


def parse_write_options(raw: Mapping[str, str]) -> WriteOptions:
    """Check the options of ``df.write`` / ``df.writeStream``; the error names the option at fault."""
    options = _lower(raw)
    _warn_unknown(options, _CONNECTION_KEYS + _WRITE_KEYS, "write")
    connection = _connection(options)
    subject = _text(options, "subject")
    if subject is not None:
        check_subject("subject", subject)
    return WriteOptions(
        connection=connection,
        subject=subject,
        msg_id_column=_text(options, "msgIdColumn"),
        idempotent=_bool(options, "idempotent", True),
        max_in_flight=_int(options, "maxInFlight", DEFAULT_MAX_IN_FLIGHT),
        publish_timeout=_seconds(options, "publishTimeout", 10.0),
    )
