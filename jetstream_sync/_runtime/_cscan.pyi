from collections.abc import Callable
from typing import Any

def scan(
    buf: bytes,
    pos: int,
    handlers: dict[int, Any],
    limit: int,
    stats: dict[str, int],
    on_error: Callable[[Exception], None],
    /,
) -> int: ...

LARGE_PAYLOAD: int

def encode_pub(subject: bytes, reply: bytes, headers: bytes | None, payload: bytes, /) -> bytes: ...
def encode_pub_parts(
    subject: bytes, reply: bytes, headers: bytes | None, payload: bytes, /
) -> bytes | tuple[bytes, ...]: ...
