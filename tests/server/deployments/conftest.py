"""The deployment matrix's fixture: a fresh server with the stream and durable consumer the workload uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig

from .harness import CONSUMER, STREAM, Deployment, served_env


@pytest.fixture
def deployment(nats_server_function) -> Iterator[Deployment]:
    """``deploy.in.<key>`` and ``deploy.done.<key>`` in one stream; the ``work`` consumer takes ``deploy.in.*``.
    ack_wait is 5 s, so a message a killed worker held comes back within the test."""
    url = nats_server_function.url
    with jetstream_sync.connect(url, name="deploy-test") as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name=STREAM, subjects=["deploy.>"], allow_direct=True))
        js.create_consumer(
            STREAM,
            ConsumerConfig(
                durable_name=CONSUMER, filter_subject="deploy.in.*", ack_policy=AckPolicy.EXPLICIT, ack_wait=5.0
            ),
        )
        yield Deployment(js, url, served_env(url))
