"""The PySpark Python Data Source ``jetstream-objects``: an object store bucket as binary files, one row per
object, as Spark's ``binaryFile`` format reads a directory.

Planning runs in Spark's planning worker on the driver (``reader()`` and ``partitions()``): it lists the
bucket once (deleted objects are not listed), keeps the names ``pathGlobFilter`` matches, resolves links to
the object they name, refuses objects a binary column cannot hold, and spreads the objects over at most
``numPartitions`` partitions balanced by size. Each executor task (``read()``, from a pickled copy) reads its
objects one after another through the object store's reader, chunk by chunk, and the reader checks each
object's SHA-256 digest before its row is handed to Spark: a digest mismatch fails the task with
[`DigestMismatchError`][jetstream_sync.errors.DigestMismatchError]. A task holds at most one object being read plus one
record batch of finished rows (about `BATCH_BYTES`, or the one object when it is bigger).

Nothing here holds a connection: workers get theirs from the per-process cache in ``integrations._clients``.
"""

from __future__ import annotations

import array
import heapq
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import attrs
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ... import errors
from ..._validate import check_bucket_name
from ...models.object_store import ObjectInfo
from .._clients import process_client
from .options import (
    _CONNECTION_KEYS,
    ConnectionOptions,
    _bool,
    _connection,
    _int,
    _lower,
    _seconds,
    _text,
    _warn_unknown,
)
from .options import redacted as _redacted

if TYPE_CHECKING:
    from ...jetstream.object_store import ObjectStore

Stores = Callable[[str], "ObjectStore"]

__all__ = [
    "BATCH_BYTES",
    "MAX_OBJECT_SIZE",
    "OBJECTS_SCHEMA",
    "JetStreamObjectsDataSource",
    "JetStreamObjectsReader",
    "ObjectReadOptions",
    "ObjectTooLargeError",
    "ObjectsPartition",
    "PlannedObject",
    "glob_pattern",
    "parse_object_options",
    "plan_partitions",
]

log = logging.getLogger("jetstream_sync.spark")

#: The largest object a row can hold: Spark's binaryFile limit (a binary value is at most Int.MaxValue bytes).
MAX_OBJECT_SIZE = 2**31 - 1
#: A record batch is handed to Spark once its contents reach this many bytes (a bigger object goes alone).
BATCH_BYTES = 32 * 1024 * 1024
#: ... or this many rows (objects without content, or many small ones).
BATCH_ROWS = 1000
#: What an object costs a task besides its bytes (its metadata lookup and consumer), for balancing partitions.
_OBJECT_COST = 64 * 1024
#: How often an object replaced while it is read is read again (the newest version) before the task fails.
_READ_ATTEMPTS = 3
#: Link hops followed at planning (the store refuses a link to a link, but the target may become one later).
_MAX_LINK_HOPS = 8

_OBJECT_KEYS = ("bucket", "pathGlobFilter", "includeContent", "ignoreMissingObjects", "numPartitions", "listTimeout")
DEFAULT_NUM_PARTITIONS = 4
DEFAULT_LIST_TIMEOUT = 60.0

#: One row per object, binaryFile's columns (``path`` is ``name`` here) and what the object store adds.
OBJECTS_SCHEMA = StructType(
    [
        StructField("name", StringType(), nullable=False),
        StructField("modified", TimestampType(), nullable=True),
        StructField("size", LongType(), nullable=False),
        StructField("digest", StringType(), nullable=True),
        StructField("content", BinaryType(), nullable=True),
        StructField("bucket", StringType(), nullable=False),
        StructField("description", StringType(), nullable=True),
        StructField("headers", MapType(StringType(), ArrayType(StringType())), nullable=True),
    ]
)


class ObjectTooLargeError(errors.ObjectStoreError):
    """An object is bigger than a binary column can hold (2 GiB - 1 byte, as Spark's binaryFile). Raised on
    the driver when planning (or by the task when the object grew since), before any data is read."""

    def __init__(self, bucket: str, name: str, size: int) -> None:
        self.bucket = bucket
        self.name = name
        self.size = size
        super().__init__(
            f"object {name!r} in bucket {bucket!r} holds {size} bytes, more than a binary column can hold "
            f"({MAX_OBJECT_SIZE}); leave it out with the option pathGlobFilter, or read the bucket with "
            "includeContent=false (metadata only) and get that object with ObjectStore.get()"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.bucket, self.name, self.size))


@attrs.frozen(kw_only=True)
class ObjectReadOptions:
    """A validated read of a bucket; picklable, it travels to the executors."""

    connection: ConnectionOptions
    bucket: str
    path_glob_filter: str | None = None
    include_content: bool = True
    ignore_missing_objects: bool = False
    num_partitions: int = DEFAULT_NUM_PARTITIONS
    list_timeout: float = DEFAULT_LIST_TIMEOUT


@attrs.frozen
class PlannedObject:
    """One row to read: ``name`` as listed in ``bucket``, its data in ``source`` (the object a link names, or
    the object itself) as the listing saw it. Executors read ``source.name`` in ``source.bucket``."""

    name: str
    bucket: str
    source: ObjectInfo


class ObjectsPartition(InputPartition):
    """One Spark partition: objects read one after another by one task, in name order."""

    def __init__(self, index: int, objects: tuple[PlannedObject, ...]) -> None:
        super().__init__(index)
        self.index = index
        self.objects = objects


# -- options -----------------------------------------------------------------------------------------------------


def glob_pattern(option: str, glob: str) -> re.Pattern[str]:
    """Hadoop's glob syntax (Spark's ``pathGlobFilter``) as a regular expression over whole object names:
    ``*`` any characters (``/`` too: object names are flat), ``?`` one, ``[abc]``, ``[a-z]``, ``[^a]`` or
    ``[!a]``, ``{a,b}`` (nested allowed), ``\\`` escapes the next character. InvalidArgumentError naming
    ``option`` when it is malformed."""
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "\\":
            if i + 1 == len(glob):
                raise errors.InvalidArgumentError(option, f"{glob!r} ends with an unescaped backslash")
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            end = glob.find("]", i + 2 if glob[i + 1 : i + 2] in ("^", "!") else i + 1)
            if end < 0:
                raise errors.InvalidArgumentError(option, f"{glob!r} has a '[' without its ']'")
            body = glob[i + 1 : end]
            negate = body[:1] in ("^", "!")
            body = body[1:] if negate else body
            if not body:
                raise errors.InvalidArgumentError(option, f"{glob!r} has an empty character class")
            escaped = "".join("\\" + ch if ch in "\\]^[" else ch for ch in body)
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth > 0:
            depth -= 1
            out.append(")")
        elif c == "," and depth > 0:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise errors.InvalidArgumentError(option, f"{glob!r} has a '{{' without its '}}'")
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error as exc:  # e.g. a reversed range [z-a]
        raise errors.InvalidArgumentError(option, f"{glob!r} is not a valid glob: {exc}") from None


def parse_object_options(raw: Mapping[str, str]) -> ObjectReadOptions:
    """Check the options of ``spark.read.format("jetstream-objects")``; the error names the option at fault.
    The connection options are format("jetstream")'s, parsed by the same code."""
    options = _lower(raw)
    _warn_unknown(options, _CONNECTION_KEYS + _OBJECT_KEYS, "objects read")
    connection = _connection(options)
    bucket = _text(options, "bucket") or _text(options, "path")
    if bucket is None:
        raise errors.InvalidArgumentError("bucket", "is required: the name of the object store bucket to read")
    check_bucket_name("bucket", bucket)  # InvalidBucketNameError, an InvalidArgumentError naming "bucket"
    glob = _text(options, "pathGlobFilter", strip=False)
    if glob is not None:
        glob_pattern("pathGlobFilter", glob)
    return ObjectReadOptions(
        connection=connection,
        bucket=bucket,
        path_glob_filter=glob,
        include_content=_bool(options, "includeContent", True),
        ignore_missing_objects=_bool(options, "ignoreMissingObjects", False),
        num_partitions=_int(options, "numPartitions", DEFAULT_NUM_PARTITIONS),
        list_timeout=_seconds(options, "listTimeout", DEFAULT_LIST_TIMEOUT),
    )


# -- planning (driver) ---------------------------------------------------------------------------------------------


def _stores(options: ObjectReadOptions) -> Stores:
    """Planning worker or executor: a bucket-name -> ObjectStore lookup through this process's client, each
    bucket bound once (a link may name another bucket)."""
    js = process_client(options.connection).jetstream(timeout=options.connection.timeout)
    bound: dict[str, ObjectStore] = {}

    def store(bucket: str) -> ObjectStore:
        if bucket not in bound:
            try:
                bound[bucket] = js.object_store(bucket)
            except errors.BucketNotFoundError as exc:
                raise errors.BucketNotFoundError(
                    exc.code,
                    exc.err_code,
                    f"object store bucket {bucket!r} does not exist on {_redacted(options.connection.servers)}"
                    + (" (option 'bucket')" if bucket == options.bucket else f" (a link in {options.bucket!r})"),
                ) from None
        return bound[bucket]

    return store


def _missing(options: ObjectReadOptions, what: str) -> None:
    """A listed object (or a link's target) that is gone: fail, or skip with a warning when asked to."""
    if options.ignore_missing_objects:
        log.warning("bucket %s: skipping %s (ignoreMissingObjects=true)", options.bucket, what)
        return
    raise errors.ObjectNotFoundError(
        f"bucket {options.bucket!r}: {what}; read again, or set the option ignoreMissingObjects=true to skip "
        "objects deleted while the query runs"
    )


def _resolve(options: ObjectReadOptions, store: Stores, info: ObjectInfo) -> ObjectInfo | None:
    """Planning worker: the object whose data a listed entry has (itself, or the object its link names);
    None for a link to a whole bucket (no data: skipped, as binaryFile skips directories) or a link whose
    target is gone and ignoreMissingObjects is set."""
    current = info
    for _ in range(_MAX_LINK_HOPS):
        link = current.link
        if link is None:
            return current
        if link.name is None:
            log.info("bucket %s: skipping %r, a link to the whole bucket %r", options.bucket, info.name, link.bucket)
            return None
        try:
            current = store(link.bucket).info(link.name)
        except errors.ObjectNotFoundError:
            _missing(options, f"link {info.name!r} names {link.bucket}/{link.name!r}, which is deleted or gone")
            return None
    raise errors.LinkError("bucket", f"{info.name!r} in {options.bucket!r}: more than {_MAX_LINK_HOPS} links in a row")


def plan_objects(options: ObjectReadOptions) -> list[PlannedObject]:
    """Planning worker: the bucket's live objects that ``pathGlobFilter`` matches, in name order, links
    resolved. ObjectTooLargeError for an object a row cannot hold (unless includeContent=false)."""
    store = _stores(options)
    pattern = glob_pattern("pathGlobFilter", options.path_glob_filter) if options.path_glob_filter else None
    planned: list[PlannedObject] = []
    listed = store(options.bucket).list(timeout=options.list_timeout)
    for info in sorted(listed, key=lambda i: i.name):
        if pattern is not None and not pattern.fullmatch(info.name):
            continue
        source = _resolve(options, store, info)
        if source is None:
            continue
        if options.include_content and source.size > MAX_OBJECT_SIZE:
            raise ObjectTooLargeError(options.bucket, info.name, source.size)
        planned.append(PlannedObject(info.name, options.bucket, source))
    log.info(
        "bucket %s: %d of %d objects to read (%d bytes)",
        options.bucket,
        len(planned),
        len(listed),
        sum(p.source.size for p in planned),
    )
    return planned


def plan_partitions(objects: Sequence[PlannedObject], num_partitions: int) -> list[ObjectsPartition]:
    """Spread objects over at most ``num_partitions`` partitions of about equal bytes: each object, biggest
    first, goes to the lightest partition so far (an object also costs `_OBJECT_COST`, so many empty
    objects spread too). Each partition reads its objects in name order; none is empty."""
    count = min(num_partitions, len(objects))
    if count == 0:
        return []
    heap = [(0, i) for i in range(count)]
    groups: list[list[PlannedObject]] = [[] for _ in range(count)]
    for obj in sorted(objects, key=lambda o: (-o.source.size, o.name)):
        load, index = heapq.heappop(heap)
        groups[index].append(obj)
        heapq.heappush(heap, (load + obj.source.size + _OBJECT_COST, index))
    return [ObjectsPartition(i, tuple(sorted(g, key=lambda o: o.name))) for i, g in enumerate(groups)]


# -- reading (executors) -------------------------------------------------------------------------------------------


class _Batch:
    """Executor: rows gathered for one record batch. Contents go straight into one growing buffer that
    becomes the Arrow column's data (no copy), so a task holds this batch and nothing else of the data."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.content_type = schema.field("content").type
        self.rows: list[tuple[PlannedObject, ObjectInfo]] = []
        self.data = bytearray()
        self.offsets = [0]
        self.with_content = False

    def add(self, planned: PlannedObject, info: ObjectInfo, with_content: bool) -> None:
        self.rows.append((planned, info))
        self.offsets.append(len(self.data))
        self.with_content = with_content

    def build(self) -> pa.RecordBatch:
        rows = self.rows
        kinds = {f.name: f.type for f in self.schema}
        n = len(rows)
        if self.with_content:
            code = "q" if pa.types.is_large_binary(self.content_type) else "i"
            offsets = pa.py_buffer(array.array(code, self.offsets))
            content = pa.Array.from_buffers(self.content_type, n, [None, offsets, pa.py_buffer(self.data)])
        else:
            content = pa.nulls(n, self.content_type)
        micros = [None if i.mtime is None else _micros(i.mtime) for _, i in rows]
        columns = {
            "name": pa.array([p.name for p, _ in rows], kinds["name"]),
            "modified": pa.array(micros, pa.int64()).cast(kinds["modified"]),
            "size": pa.array([i.size for _, i in rows], kinds["size"]),
            "digest": pa.array([i.digest for _, i in rows], kinds["digest"]),
            "content": content,
            "bucket": pa.array([p.bucket for p, _ in rows], kinds["bucket"]),
            "description": pa.array([i.description for _, i in rows], kinds["description"]),
            "headers": pa.array([list(i.headers.items()) if i.headers else None for _, i in rows], kinds["headers"]),
        }
        return pa.RecordBatch.from_arrays([columns[f.name] for f in self.schema], schema=self.schema)


def _micros(moment: datetime) -> int:
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _read_into(options: ObjectReadOptions, store: Stores, planned: PlannedObject, data: bytearray) -> ObjectInfo | None:
    """Executor: append the data of ``planned`` to ``data``, its digest verified; the info of the version
    read, or None when it is gone and ignoreMissingObjects is set. An object replaced since planning, or
    while it is read, is read as its newest version (the row then shows that version's size, digest and
    time), with a warning; after `_READ_ATTEMPTS` replacements in a row the task fails. A digest
    mismatch of an object that was not replaced fails the task with DigestMismatchError."""
    source = planned.source
    mark = len(data)
    for _ in range(_READ_ATTEMPTS):
        try:
            reader = store(source.bucket).get(source.name, timeout=options.connection.timeout)
        except errors.ObjectNotFoundError:
            _missing(options, f"object {planned.name!r} was deleted after the read was planned")
            return None
        with reader:
            info = reader.info
            if info.nuid != source.nuid:
                log.warning(
                    "bucket %s: object %r was replaced after the read was planned; reading its newest version "
                    "(%d bytes, %s)",
                    planned.bucket,
                    planned.name,
                    info.size,
                    info.digest,
                )
            if info.size > MAX_OBJECT_SIZE:
                raise ObjectTooLargeError(planned.bucket, planned.name, info.size)
            try:
                while chunk := reader.read1():  # the read that reaches the end checks size and digest
                    data.extend(chunk)
                return info
            except errors.DigestMismatchError:
                del data[mark:]
                if not _replaced(store, source.bucket, source.name, info):
                    raise
                log.warning(
                    "bucket %s: object %r was replaced or deleted while it was read; reading it again",
                    planned.bucket,
                    planned.name,
                )
    raise errors.DigestMismatchError(
        f"bucket {planned.bucket!r}: object {planned.name!r} was replaced {_READ_ATTEMPTS} times while it was "
        "read; retry when writes to it have settled"
    )


def _replaced(store: Stores, bucket: str, name: str, read: ObjectInfo) -> bool:
    """Executor: whether the object read as ``read`` has another version now (or was deleted)."""
    try:
        now: ObjectInfo = store(bucket).info(name, show_deleted=True)
    except errors.ObjectNotFoundError:
        return True
    return now.deleted or now.nuid != read.nuid


def read_objects(
    options: ObjectReadOptions, objects: Sequence[PlannedObject], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Executor: the rows of ``objects`` as record batches of ``schema``, one object read at a time, a batch
    handed on once it reaches `BATCH_BYTES` or `BATCH_ROWS` (before the object that would pass it)."""
    store = _stores(options) if options.include_content else None
    batch = _Batch(schema)
    for planned in objects:
        if batch.rows and (len(batch.rows) >= BATCH_ROWS or len(batch.data) + planned.source.size > BATCH_BYTES):
            yield batch.build()
            batch = _Batch(schema)
        if store is None:
            batch.add(planned, planned.source, with_content=False)
            continue
        info = _read_into(options, store, planned, batch.data)
        if info is not None:
            batch.add(planned, info, with_content=True)
    if batch.rows:
        yield batch.build()


# -- the data source -----------------------------------------------------------------------------------------------


def _check_schema(schema: StructType) -> None:
    """A user-given schema may differ in nullability only: the columns are what the bucket holds."""
    expected = [(f.name, f.dataType) for f in OBJECTS_SCHEMA.fields]
    given = [(f.name, f.dataType) for f in schema.fields]
    if given != expected:
        raise errors.InvalidArgumentError(
            "schema",
            f"the jetstream-objects source returns {OBJECTS_SCHEMA.simpleString()}; got {schema.simpleString()}",
        )


class JetStreamObjectsDataSource(DataSource):
    """``spark.read.format("jetstream-objects")``: an object store bucket as binary files, one row per
    object. Register it with ``spark.dataSource.register(JetStreamObjectsDataSource)``. Batch reads only."""

    @classmethod
    def name(cls) -> str:
        """PySpark: the format name, ``jetstream-objects``."""
        return "jetstream-objects"

    def schema(self) -> StructType:
        """PySpark: name, modified, size, digest, content, bucket, description, headers."""
        return OBJECTS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """PySpark, planning worker on the driver: a batch reader for these options (checked here, before
        anything is sent)."""
        _check_schema(schema)
        return JetStreamObjectsReader(parse_object_options(self.options), schema)


class JetStreamObjectsReader(DataSourceReader):
    """A batch read of one bucket, listed when the query runs."""

    def __init__(self, options: ObjectReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """PySpark, planning worker on the driver: list the bucket and spread its objects over partitions."""
        planned = plan_partitions(plan_objects(self.options), self.options.num_partitions)
        log.info("bucket %s: %d partitions", self.options.bucket, len(planned))
        return planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark, executor: the rows of one partition, as Arrow record batches."""
        if not isinstance(partition, ObjectsPartition):  # Spark reads one empty partition when there is nothing
            return iter(())
        from pyspark.sql.pandas.types import to_arrow_schema

        return read_objects(self.options, partition.objects, to_arrow_schema(self.schema, timezone="UTC"))
