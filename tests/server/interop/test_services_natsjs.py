"""Services interop with nats.js (node): nats.js's services client finds our service, reads its PING, INFO and
STATS and calls it (error headers included); our ServiceClient finds a nats.js service and calls it.

nats.js 2.29 (the ``nats`` package, whose ``nc.services`` is the services API; the registry this runs against has
no release of ``@nats-io/services`` 3.x, only pre-releases) is installed with npm into a cache directory the first
time (``~/.cache/jetstream-sync/natsjs-services-2.29.3``, or ``$JETSTREAM_SYNC_NATSJS_SERVICES_DIR``), as the
other nats.js interop test does; without ``node`` and ``npm`` the test is skipped, saying so.
There was no services code before this: these are new behaviour.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jetstream_sync.services import Request, Service, ServiceClient, ServiceError

NATSJS = "2.29.3"
SCRIPT = Path(__file__).with_name("services_natsjs.mjs")


@pytest.fixture(scope="session")
def natsjs_services() -> Path:
    """The directory holding the nats package's node_modules (installed once, then reused)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the nats.js services interop test needs them")
    home = Path(
        os.environ.get(
            "JETSTREAM_SYNC_NATSJS_SERVICES_DIR",
            Path.home() / ".cache" / "jetstream-sync" / f"natsjs-services-{NATSJS}",
        )
    )
    if not (home / "node_modules" / "nats" / "package.json").is_file():
        home.mkdir(parents=True, exist_ok=True)
        (home / "package.json").write_text('{"name": "natsjs-services-interop", "private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", f"nats@{NATSJS}"],
            cwd=home, check=True, timeout=300,
        )  # fmt: skip
    return home


def test_services_interop_with_natsjs_both_ways(natsjs_services, nats_server, client, name):
    service = Service(name, "1.4.0", description="ours, for nats.js", metadata={"lang": "python-sync"})

    @service.group("js").endpoint(metadata={"greets": "callers"})
    def greet(request: Request) -> str:
        if not request.data:
            raise ServiceError(400, f"no name given by {request.headers.get('Caller', 'someone')}")
        return f"hello {request.text()}"

    theirs = f"{name}_js"
    script = natsjs_services / "services_interop.mjs"
    shutil.copyfile(SCRIPT, script)  # node resolves packages from the script's directory
    with service.start(client) as instance:
        node = subprocess.Popen(
            ["node", str(script)],
            env={**os.environ, "NATS_URL": nats_server.url, "OURS": name, "THEIRS": theirs},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert node.stdout is not None and node.stdin is not None
            read = json.loads(node.stdout.readline() or "null")
            assert read is not None, node.communicate(timeout=10)
            ready = json.loads(node.stdout.readline())["ready"]

            # nats.js read ours
            seen = read["read"]
            assert seen["pings"] == [
                {
                    "type": "io.nats.micro.v1.ping_response",
                    "name": name,
                    "id": instance.id,
                    "version": "1.4.0",
                    "metadata": {"lang": "python-sync"},
                }
            ]
            assert seen["info"] == [
                {
                    "description": "ours, for nats.js",
                    "endpoints": [
                        {"name": "greet", "subject": "js.greet", "queue_group": "q", "metadata": {"greets": "callers"}}
                    ],
                }
            ]
            assert seen["greet"] == "hello nats.js"
            assert seen["error"] == {"code": "400", "description": "no name given by nats.js"}
            (stats,) = seen["stats"]
            (endpoint,) = stats["endpoints"]
            assert (endpoint["num_requests"], endpoint["num_errors"]) == (2, 1)
            assert endpoint["last_error"] == "400:no name given by nats.js" and endpoint["processing_time"] > 0

            # we read theirs
            services = ServiceClient(client, timeout=10)  # an answer late on a loaded machine is still an answer
            (ping,) = services.ping(theirs)
            assert (ping.id, ping.version, ping.metadata) == (ready["id"], "3.1.4", {"lang": "js"})
            (info,) = services.info(theirs, ready["id"])
            assert info.description == "from nats.js"
            assert [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints] == [
                ("sum", "natsjs.sum", "q", {"args": "numbers"}),
                ("fail", "natsjs.fail", "q", {}),
            ]
            assert json.loads(services.request("natsjs.sum", b"[1, 2, 39]").data) == {"sum": 42}
            with pytest.raises(ServiceError) as raised:
                services.request("natsjs.sum", b'{"not": "a list"}')
            assert (raised.value.code, raised.value.description) == (400, "a list of numbers, please")
            with pytest.raises(ServiceError) as raised:
                services.request("natsjs.fail")
            assert (raised.value.code, raised.value.description) == (451, "unavailable for legal reasons")
            (their_stats,) = services.stats(theirs)
            counts = {e.name: (e.num_requests, e.num_errors) for e in their_stats.endpoints}
            assert counts == {"sum": (2, 0), "fail": (1, 1)}
        finally:
            if node.stdin is not None:
                node.stdin.close()  # nats.js stops its service and exits
            try:
                node.wait(20)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait(5)
            err = node.stderr.read() if node.stderr is not None else ""
        assert node.returncode == 0, err
