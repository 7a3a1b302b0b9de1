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

REVISION: int

class DeliverySink:
    msg_type: type
    headers_fast: int
    def __init__(
        self,
        msg_type: type,
        slow: Callable[[bytes, bytes, bytes, bytes | None], object],
        deliver: Callable[[list[Any], int], object],
        sender: object,
        ack_none: bool,
        prefix: bytes,
        headers_fast: bool,
    ) -> None: ...
    def __call__(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None, /) -> object: ...
