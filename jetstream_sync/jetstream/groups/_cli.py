"""``python -m jetstream_sync group ...``: list, inspect, create, delete and edit partitioned consumer groups, as
orbit.go's ``cg`` tool does (the same subcommands and mapping syntax), on the same buckets.

    python -m jetstream_sync group elastic create orders workers 12 --filter 'orders.*:1'
    python -m jetstream_sync group elastic add orders workers m1 m2
    python -m jetstream_sync group elastic info orders workers
    python -m jetstream_sync group static create orders pinned 4 --members a b
    python -m jetstream_sync group static create orders mapped 4 --mapping a:0,1 --mapping b:2,3

Exit status 0 on success, 1 with one line on stderr for an expected failure (no such group, bad input, the
server refused); 2 for a command line argparse refuses.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, TextIO

from ... import errors
from ...options import DEFAULT_URL
from .admin import PartitionedGroups
from .config import ElasticGroupConfig, MemberMapping, PartitioningFilter, StaticGroupConfig

if TYPE_CHECKING:
    from ...client import Client

__all__ = ["add_group_parser", "run_group_command"]


def _mapping(text: str) -> MemberMapping:
    """``member:0,1,2`` (orbit's ``cg`` syntax)."""
    member, colon, partitions = text.partition(":")
    if not colon or not member:
        raise argparse.ArgumentTypeError(f"{text!r} is not member:partition,partition,...")
    try:
        numbers = [int(p) for p in partitions.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: partitions must be numbers") from None
    return MemberMapping(member=member, partitions=numbers)


def _partitioning_filter(text: str) -> PartitioningFilter:
    """``filter`` (the whole subject is the key) or ``filter:1,2`` (the key is those ``*`` wildcards)."""
    subject_filter, colon, wildcards = text.rpartition(":") if ":" in text else (text, "", "")
    try:
        indexes = [int(w) for w in wildcards.split(",") if w.strip()] if colon else []
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: wildcard indexes must be numbers") from None
    return PartitioningFilter(filter=subject_filter, partitioning_wildcards=indexes)


def add_group_parser(commands: Any) -> None:
    """Add ``group`` and its subcommands to the ``python -m jetstream_sync`` parser."""
    group = commands.add_parser("group", help="partitioned consumer groups (orbit's cg): ls, info, create, ...")
    group.add_argument(
        "--server", default=os.environ.get("NATS_URL") or DEFAULT_URL, help=f"default $NATS_URL, else {DEFAULT_URL}"
    )
    group.add_argument("--creds", help="a .creds file (user JWT and seed)")
    group.add_argument("--user", help="user name")
    group.add_argument("--password", default=os.environ.get("NATS_PASSWORD"), help="password (or NATS_PASSWORD)")
    group.add_argument("--token", default=os.environ.get("NATS_TOKEN"), help="token (or NATS_TOKEN)")
    group.add_argument("--timeout", type=float, default=5.0, help="seconds for the connect and each request (5)")
    kinds = group.add_subparsers(dest="kind", metavar="{static,elastic}", required=True)
    actions = {}
    for kind in ("static", "elastic"):
        sub = kinds.add_parser(kind, help=f"{kind} groups").add_subparsers(dest="action", required=True)
        actions[kind] = sub
        ls = sub.add_parser("ls", help="the groups on a stream")
        ls.add_argument("stream")
        for action, what in (
            ("info", "a group's config, members and their consumers"),
            ("delete", "delete a group (its members stop)"),
        ):
            parser = sub.add_parser(action, help=what)
            parser.add_argument("stream")
            parser.add_argument("group")
            if action == "delete":
                parser.add_argument("--force", "-f", action="store_true", help="do not ask for confirmation")
        for action, what in (("member-info", "one member's state"), ("step-down", "move a member's pin")):
            parser = sub.add_parser(action, help=what)
            parser.add_argument("stream")
            parser.add_argument("group")
            parser.add_argument("member")
        create = sub.add_parser("create", help=f"create a {kind} group")
        create.add_argument("stream")
        create.add_argument("group")
        create.add_argument("max_members", type=int, help="the number of partitions")
        if kind == "static":
            create.add_argument("--members", nargs="+", default=None, help="members sharing the partitions evenly")
            create.add_argument("--mapping", type=_mapping, action="append", help="member:0,1,... (repeat)")
            create.add_argument("--filter", action="append", help="what the group reads (repeat; default all)")
        else:
            create.add_argument(
                "--filter", type=_partitioning_filter, action="append", help="filter[:wildcard,...] (repeat)"
            )
            create.add_argument("--max-buffered-msgs", type=int, default=0)
            create.add_argument("--max-buffered-bytes", type=int, default=0)
    elastic = actions["elastic"]
    for action, what in (("add", "add members"), ("drop", "remove members")):
        parser = elastic.add_parser(action, help=what)
        parser.add_argument("stream")
        parser.add_argument("group")
        parser.add_argument("members", nargs="+")
    mapping = elastic.add_parser("create-mapping", help="assign partitions by hand: member:0,1,... (each)")
    mapping.add_argument("stream")
    mapping.add_argument("group")
    mapping.add_argument("mappings", type=_mapping, nargs="+")
    unmap = elastic.add_parser("delete-mapping", help="drop the hand-made mappings")
    unmap.add_argument("stream")
    unmap.add_argument("group")


def _describe(config: StaticGroupConfig | ElasticGroupConfig, out: TextIO) -> None:
    out.write(f"config: {config.to_json().decode()}\n")
    if config.members:
        out.write(f"members: {' '.join(config.members)}\n")
    elif config.member_mappings:
        shown = " ".join(f"{m.member}:{','.join(str(p) for p in m.partitions or [])}" for m in config.member_mappings)
        out.write(f"member mappings: {shown}\n")
    else:
        out.write("no members or mappings defined\n")


def run_group_command(args: argparse.Namespace, client: Client, out: TextIO, answer: TextIO | None) -> int:
    """Run a parsed ``group`` command on a connected client; ``answer`` is where a delete's confirmation is
    read from (None: a delete needs ``--force``)."""
    groups = PartitionedGroups(client.jetstream(timeout=args.timeout))
    elastic = args.kind == "elastic"
    action = args.action
    if action == "ls":
        names = groups.elastic_groups(args.stream) if elastic else groups.static_groups(args.stream)
        out.write("".join(f"{n}\n" for n in names) or f"no {args.kind} groups on stream {args.stream}\n")
        return 0
    if action == "info":
        config = (
            groups.elastic_config(args.stream, args.group) if elastic else groups.static_config(args.stream, args.group)
        )
        _describe(config, out)
        for status in groups.member_status(args.stream, args.group, elastic=elastic):
            lag = status.lag
            if lag is None:
                out.write(
                    f"  {status.member}: partitions {status.partitions}, consumer {status.consumer} (no consumer)\n"
                )
                continue
            out.write(
                f"  {status.member}: partitions {status.partitions}, consumer {status.consumer}"
                f" ({'pinned' if status.pinned else 'active'}), pending {lag.pending}, ack pending {lag.ack_pending},"
                f" redelivered {lag.redelivered}\n"
            )
        return 0
    if action == "create":
        if elastic:
            groups.create_elastic(
                args.stream,
                args.group,
                args.max_members,
                partitioning_filters=args.filter,
                max_buffered_msgs=args.max_buffered_msgs,
                max_buffered_bytes=args.max_buffered_bytes,
            )
        else:
            groups.create_static(
                args.stream,
                args.group,
                args.max_members,
                members=args.members,
                member_mappings=args.mapping,
                filters=args.filter,
            )
        out.write(f"created {args.kind} group {args.group} on stream {args.stream}\n")
        return 0
    if action == "delete":
        if not args.force:
            if answer is None:
                raise errors.InvalidArgumentError("--force", "deleting a group stops its members: confirm with --force")
            out.write("deleting the group stops all its members; are you sure? (y/n): ")
            out.flush()
            if answer.readline().strip().lower() != "y":
                out.write("not deleted\n")
                return 1
        if elastic:
            groups.delete_elastic(args.stream, args.group)
        else:
            groups.delete_static(args.stream, args.group)
        out.write(f"deleted {args.kind} group {args.group} on stream {args.stream}\n")
        return 0
    if action in ("member-info", "step-down"):
        if action == "step-down":
            groups.step_down(args.stream, args.group, args.member, elastic=elastic)
            out.write(f"member {args.member}: its pin was released; another instance takes over\n")
            return 0
        statuses = {s.member: s for s in groups.member_status(args.stream, args.group, elastic=elastic)}
        found = statuses.get(args.member)
        if found is None:
            out.write(f"member {args.member} is not part of the group's membership\n")
        elif found.active:
            out.write(f"member {args.member} is part of the membership and active: partitions {found.partitions}\n")
        else:
            out.write(f"member {args.member} is part of the membership but has NO active instance\n")
        return 0
    if action in ("add", "drop"):
        edit = groups.add_members if action == "add" else groups.remove_members
        members = edit(args.stream, args.group, args.members)
        out.write(f"members: {' '.join(members) or '(none)'}\n")
        return 0
    if action == "create-mapping":
        _describe(groups.set_member_mappings(args.stream, args.group, args.mappings), out)
        return 0
    _describe(groups.delete_member_mappings(args.stream, args.group), out)  # delete-mapping
    return 0
