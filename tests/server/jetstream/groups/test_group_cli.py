"""``python -m jetstream_sync group ...`` (orbit's ``cg`` subcommands) against a real server: one subprocess run
as users type it, the rest through ``main()`` in this process (the same parser and code, without a Python start
per command)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

from jetstream_sync import PartitionedGroups, StreamConfig
from jetstream_sync.__main__ import main
from tests.helpers import wait_until


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["group", *args], out, err)
    return status, out.getvalue(), err.getvalue()


def test_the_cli_creates_edits_inspects_and_deletes_groups(js, name, nats_server):
    url = nats_server.url
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.*"]))
    groups = PartitionedGroups(js)

    result = subprocess.run(
        [sys.executable, "-m", "jetstream_sync", "group", "--server", url, "elastic", "create", name, "g", "4",
         "--filter", f"{name}.*:1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"created elastic group g on stream {name}\n"
    stored = json.loads(js.key_value("elastic-consumer-groups").get(f"{name}.g").value)
    assert stored == {
        "max_members": 4,
        "partitioning_filters": [{"filter": f"{name}.*", "partitioning_wildcards": [1]}],
    }

    assert cli("--server", url, "elastic", "ls", name) == (0, "g\n", "")
    assert cli("--server", url, "elastic", "add", name, "g", "m2", "m1") == (0, "members: m2 m1\n", "")
    status, out, _err = cli("--server", url, "elastic", "info", name, "g")
    assert status == 0
    assert out.splitlines() == [
        f'config: {{"max_members":4,"partitioning_filters":[{{"filter":"{name}.*","partitioning_wildcards":[1]}}],'
        '"members":["m2","m1"]}',
        "members: m2 m1",
        "  m2: partitions [2, 3], consumer m2 (no consumer)",
        "  m1: partitions [0, 1], consumer m1 (no consumer)",
    ]
    member = groups.join_elastic(name, "g", "m1", lambda msg: msg.ack(), ack_wait=1)
    try:
        wait_until(lambda: member.consuming, timeout=10)
        status, out, _err = cli("--server", url, "elastic", "info", name, "g")
        assert re.fullmatch(
            r"  m1: partitions \[0, 1\], consumer m1 \((pinned|active)\), pending 0, ack pending 0, redelivered 0",
            out.splitlines()[-1],
        )
        assert cli("--server", url, "elastic", "member-info", name, "g", "m1") == (
            0,
            "member m1 is part of the membership and active: partitions [0, 1]\n",
            "",
        )
    finally:
        member.stop(timeout=10)
    # its consumer goes when idle for its inactive threshold (the ack wait, 1 s)
    wait_until(
        lambda: (
            cli("--server", url, "elastic", "member-info", name, "g", "m1")
            == (0, "member m1 is part of the membership but has NO active instance\n", "")
        ),
        timeout=10,
        interval=0.2,
    )
    assert cli("--server", url, "elastic", "member-info", name, "g", "zz") == (
        0,
        "member zz is not part of the group's membership\n",
        "",
    )
    assert cli("--server", url, "elastic", "drop", name, "g", "m2") == (0, "members: m1\n", "")
    assert cli("--server", url, "elastic", "create-mapping", name, "g", "a:0,1", "b:2,3") == (
        0,
        f'config: {{"max_members":4,"partitioning_filters":[{{"filter":"{name}.*","partitioning_wildcards":[1]}}],'
        '"member_mappings":[{"member":"a","partitions":[0,1]},{"member":"b","partitions":[2,3]}]}\n'
        "member mappings: a:0,1 b:2,3\n",
        "",
    )
    # a mapping that leaves a partition out is refused before anything is written
    status, out, err = cli("--server", url, "elastic", "create-mapping", name, "g", "a:0,1", "b:2")
    assert (status, out) == (1, "")
    assert err == "error: member_mappings: the mappings must cover every partition 0..3; missing [3]\n"
    assert groups.elastic_config(name, "g").member_mappings is not None
    status, out, _err = cli("--server", url, "elastic", "delete-mapping", name, "g")
    assert (status, out.splitlines()[-1]) == (0, "no members or mappings defined")

    assert cli("--server", url, "static", "create", name, "s", "2", "--members", "x", "y") == (
        0,
        f"created static group s on stream {name}\n",
        "",
    )
    assert cli("--server", url, "static", "ls", name) == (0, "s\n", "")
    status, out, _err = cli("--server", url, "static", "info", name, "s")
    assert out.splitlines()[:2] == ['config: {"max_members":2,"members":["x","y"]}', "members: x y"]

    # deleting asks for --force when nobody can answer a prompt
    status, out, err = cli("--server", url, "static", "delete", name, "s")
    assert (status, err) == (1, "error: --force: deleting a group stops its members: confirm with --force\n")
    assert cli("--server", url, "static", "delete", name, "s", "--force") == (
        0,
        f"deleted static group s on stream {name}\n",
        "",
    )
    assert cli("--server", url, "elastic", "delete", name, "g", "-f")[0] == 0
    assert cli("--server", url, "elastic", "ls", name) == (0, f"no elastic groups on stream {name}\n", "")
    assert name + "-g" not in set(js.stream_names())

    status, out, err = cli("--server", url, "static", "info", name, "nope")
    assert (status, out) == (1, "")
    missing = f"no static consumer group 'nope' on stream {name!r} (no key '{name}.nope' in 'static-consumer-groups')"
    assert err == f"error: {missing}\n"
