"""The compiled PUB encoder (``_cscan.c``) builds exactly the commands ``_protocol.py``'s reference functions do.

Both are called with the same arguments: subjects and replies of every length class, no reply, no headers and
header blocks (empty too), payloads empty, small, at the size where a command is split into parts and one byte
past it, large, and bytes-like objects other than bytes; generated ones at random as well. The results (bytes,
or the parts of a large command, with the caller's payload object itself in the middle) must be equal, and a
wrong argument must raise TypeError on both paths. CI runs this module on both paths; it skips the comparison
only where the extension was not built. That the runtime's encoder follows ``JETSTREAM_SYNC_PURE_PYTHON`` is
checked in a subprocess, as the parser's switch is (test_parser_paths.py).
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys

import pytest

from jetstream_sync import _protocol
from jetstream_sync._runtime import _scan

try:
    from jetstream_sync._runtime import _cscan
except ImportError:  # built where a compiler exists; CI checks that it was
    _cscan = None  # type: ignore[assignment]

needs_compiled = pytest.mark.skipif(_cscan is None, reason="the compiled extension is not built here")

SUBJECTS = [b"a", b"orders.eu.new", b"x" * 255, "s\u00fcbject.\u00e9".encode()]
REPLIES = [b"", None, b"r", b"_INBOX.abcdefghijklmnop.42", b"$JS.ACK.s.c.1.2.3.4.5"]
HEADERS = [None, b"", b"NATS/1.0\r\n\r\n", b"NATS/1.0\r\nNats-Msg-Id: 7\r\nK: " + b"v" * 5000 + b"\r\n\r\n"]
LARGE = _protocol.LARGE_PAYLOAD
PAYLOADS = [b"", b"hi", b"\r\n", b"x" * 128, b"y" * (LARGE - 1), b"z" * LARGE, b"w" * (LARGE + 1), b"v" * 70_000]


def _same(subject: object, reply: object, headers: object, payload: object) -> None:
    for name in ("encode_pub", "encode_pub_parts"):
        reference = getattr(_protocol, name)(subject, reply, headers, payload)
        compiled = getattr(_cscan, name)(subject, reply, headers, payload)
        assert type(compiled) is type(reference), (name, subject, reply, headers, len(payload))  # type: ignore[arg-type]
        assert compiled == reference, (name, subject, reply, headers, len(payload))  # type: ignore[arg-type]
        if isinstance(reference, tuple):
            assert compiled[1] is payload  # the payload is not copied into a large command's parts


@needs_compiled
def test_the_extension_splits_at_the_same_size() -> None:
    assert _cscan.LARGE_PAYLOAD == _protocol.LARGE_PAYLOAD


@needs_compiled
@pytest.mark.parametrize("subject", SUBJECTS)
def test_every_combination_encodes_the_same(subject: bytes) -> None:
    for reply, headers, payload in itertools.product(REPLIES, HEADERS, PAYLOADS):
        _same(subject, reply, headers, payload)


@needs_compiled
def test_bytes_like_arguments_encode_the_same() -> None:
    for payload in (bytearray(b"ab"), memoryview(b"x" * (LARGE + 3)), bytearray(LARGE + 9)):
        _same(bytearray(b"a.b"), memoryview(b"r"), bytearray(b"NATS/1.0\r\n\r\n"), payload)
        _same(b"a.b", b"", None, payload)


@needs_compiled
def test_generated_commands_encode_the_same() -> None:
    rng = random.Random(29)
    for _ in range(2000):
        subject = rng.randbytes(rng.randint(1, 300))
        reply = rng.choice([b"", rng.randbytes(rng.randint(1, 80))])
        headers = rng.choice([None, rng.randbytes(rng.randint(0, 300))])
        payload = rng.randbytes(rng.choice([rng.randint(0, 200), rng.randint(LARGE - 2, LARGE + 2), 20_000]))
        _same(subject, reply, headers, payload)


@needs_compiled
@pytest.mark.parametrize(
    "args",
    [
        ("a", b"", None, b"x"),  # a str subject
        (b"a", 7, None, b"x"),
        (b"a", b"", "NATS/1.0\r\n\r\n", b"x"),
        (b"a", b"", None, "text"),
        (b"a", b"", None, 5),
    ],
)
def test_a_wrong_argument_is_a_type_error_on_both_paths(args: tuple[object, ...]) -> None:
    for module in (_protocol, _cscan):
        for name in ("encode_pub", "encode_pub_parts"):
            with pytest.raises(TypeError):
                getattr(module, name)(*args)


@needs_compiled
def test_the_compiled_encoder_takes_exactly_four_arguments() -> None:
    with pytest.raises(TypeError, match="takes 4 arguments"):
        _cscan.encode_pub(b"a", b"", None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes 4 arguments"):
        _cscan.encode_pub_parts(b"a", b"", None, b"x", b"y")  # type: ignore[call-arg]


ENCODER_IN_USE = """
from jetstream_sync import _protocol
from jetstream_sync._runtime import _scan, encode_pub, encode_pub_parts
print("REFERENCE", encode_pub is _protocol.encode_pub and encode_pub_parts is _protocol.encode_pub_parts)
print("RESULT", encode_pub_parts(b"a", b"r", None, b"hi") == b"PUB a r 2\\r\\nhi\\r\\n")
"""


@pytest.mark.parametrize("pure", ["", "1"])
def test_the_runtime_encoder_follows_the_switch(pure: str) -> None:
    env = {**os.environ, _scan.PURE_PYTHON_ENV: pure}
    done = subprocess.run(
        [sys.executable, "-c", ENCODER_IN_USE], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert f"REFERENCE {bool(pure) or _cscan is None}" in done.stdout
    assert "RESULT True" in done.stdout
