"""The reproducers of docs/upstream/: each report carries its program verbatim, and (opt-in, ``-m soak``) each one
still reproduces its anomaly on a 3-node EmbeddedCluster.

The reproductions assert nats-server behaviour that its maintainers may change. So they are opt-in: a failure
means the server no longer does it (compare the report's code path with the new release), not that this project
broke.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import KeyValueConfig
from jetstream_sync.testing import EmbeddedCluster

UPSTREAM = Path(__file__).resolve().parents[3] / "docs" / "upstream"
REPORTS = {
    "kv-cas-refused-but-stored.md": "repro_cas_10164.py",
    "stale-leader-read.md": "repro_stale_leader_read.py",
}
ATTEMPTS = 3  # each reproduces in most attempts (see the rates in the reports)


@pytest.mark.parametrize(("report", "script"), sorted(REPORTS.items()))
def test_each_report_carries_its_reproducer_verbatim(report: str, script: str) -> None:
    """The program in the report is the runnable file, so neither can drift from the other."""
    text = (UPSTREAM / report).read_text(encoding="utf-8")
    program = (UPSTREAM / script).read_text(encoding="utf-8")
    assert f"```python\n{program}```" in text, f"{report} does not embed {script} as it is now"
    assert f"python docs/upstream/{script}" in text  # and says how to run it


def _load(script: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"), UPSTREAM / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _with_bucket(cluster: EmbeddedCluster, bucket: str) -> None:
    with jetstream_sync.connect(cluster.urls) as nc:
        nc.jetstream(timeout=30).create_key_value(KeyValueConfig(bucket=bucket, replicas=3))


def _until_anomaly(
    cluster: EmbeddedCluster, repro: ModuleType, attempt: Callable[[int], Coroutine[Any, Any, dict[str, Any]]]
) -> dict[str, Any]:
    """Run a reproducer's attempts (each on a whole cluster) until one shows its anomaly; that attempt's result."""
    _with_bucket(cluster, repro.BUCKET)
    results: list[dict[str, Any]] = []
    for n in range(ATTEMPTS):
        results.append(asyncio.run(attempt(n)))
        if results[-1]["anomaly"]:
            break
        cluster.wait_formed()
    assert results[-1]["anomaly"], results
    return results[-1]


@pytest.mark.cluster
@pytest.mark.soak
@pytest.mark.timeout(300)
def test_a_cas_refused_with_10164_by_the_healed_node_is_stored_by_the_new_leader(nats_cluster):
    repro = _load("repro_cas_10164.py")
    result = _until_anomaly(nats_cluster, repro, lambda n: repro.attempt_nats_py(nats_cluster, n, 2.0))
    answers = [answer for _, answer in result["answers_to_stored"]]
    assert answers[0].startswith("10164") and any(a.startswith("ack") for a in answers[1:]), result
    # the client-side way out: the same message again, same Nats-Msg-Id, is a duplicate of the stored one
    assert any("duplicate (the stored one)" in outcome for outcome in result["refused_cas_sent_again"]), result


@pytest.mark.cluster
@pytest.mark.soak
@pytest.mark.timeout(300)
def test_a_partitioned_leader_answers_leader_reads_from_its_stale_store(nats_cluster):
    repro = _load("repro_stale_leader_read.py")
    result = _until_anomaly(nats_cluster, repro, lambda n: repro.attempt_nats_py(nats_cluster, n, True))
    assert result["stale_reads"] > 0
