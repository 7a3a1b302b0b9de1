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
