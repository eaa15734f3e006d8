"""Inspect a dbt project's history tables from the command line, on the lakehouse its profile
names (the embedded Spark or a Spark Connect server): a dbt operation, so it reads what dbt reads.

    lakehistory status                         per table: applied and pending batches, last transaction, lag
    lakehistory log [--table T] [--operation OP] [--since TIME] [--limit N]
                                               the transactions, newest first
    lakehistory timeline TABLE KEY [KEY ...]   every version of one key, valid and transaction time
    lakehistory diff TABLE V1 V2               the rows that differ between two versions
    lakehistory as-of TABLE V                  the table's rows after transaction V
    lakehistory tag NAME [TXN] [--note TEXT]   name a transaction (default: the last visible one)
    lakehistory tag --drop NAME                drop a tag
    lakehistory tags                           the tags
    lakehistory branch create NAME [--from TAG|TXN]
                                               a branch: the schema <schema>__NAME as of a tag or transaction
    lakehistory branch publish NAME            the branch's transactions as one transaction of main
    lakehistory branch drop NAME               drop the branch
    lakehistory branch list                    the branches: fork, and whether each can be published

Every command takes dbt's --project-dir, --profiles-dir and --target (run it in the project's
folder, as dbt is, or name the folder).

Fivetran's side, which needs no dbt project (lakehistory.destination):

    lakehistory destination [--port N] ...     the Partner SDK destination: lands what Fivetran sends
    lakehistory destination sources ROOT SCHEMA
                                               the dbt source entry (and models) of what it landed
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any


def parser() -> argparse.ArgumentParser:
    dbt = argparse.ArgumentParser(add_help=False)
    dbt.add_argument("--project-dir", help="the dbt project (default: the current folder)")
    dbt.add_argument("--profiles-dir", help="where profiles.yml is (default: as dbt finds it)")
    dbt.add_argument("--target", help="the profile's target (default: the profile's own)")
    top = argparse.ArgumentParser(
        prog="lakehistory", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("status", parents=[dbt], help="applied and pending batches per table")
    log = commands.add_parser("log", parents=[dbt], help="the transactions, newest first")
    log.add_argument("--table", dest="table_name", help="a history table, snapshot or landed source table")
    log.add_argument("--operation", choices=["batch", "edit", "snapshot", "cleanup", "revert"])
    log.add_argument("--since", help="committed at or after this time, e.g. 2024-05-01 or '2024-05-01 12:00'")
    log.add_argument("--limit", type=int, default=20)
    timeline = commands.add_parser("timeline", parents=[dbt], help="every version of one key")
    timeline.add_argument("table_name", metavar="TABLE")
    timeline.add_argument("key", metavar="KEY", nargs="+", help="the key's values, in the key's column order")
    diff = commands.add_parser("diff", parents=[dbt], help="the rows that differ between two versions")
    diff.add_argument("table_name", metavar="TABLE")
    diff.add_argument("v1", metavar="V1")
    diff.add_argument("v2", metavar="V2")
    diff.add_argument("--limit", type=int, default=50)
    as_of = commands.add_parser("as-of", parents=[dbt], help="the rows after one transaction")
    as_of.add_argument("table_name", metavar="TABLE")
    as_of.add_argument("version", metavar="V")
    as_of.add_argument("--limit", type=int, default=50)
    tag = commands.add_parser("tag", parents=[dbt], help="name a transaction, or drop a tag (--drop)")
    tag.add_argument("name", metavar="NAME")
    tag.add_argument("txn", metavar="TXN", nargs="?", type=int, help="the transaction (default: the last visible one)")
    tag.add_argument("--note", help="why, kept with the tag")
    tag.add_argument("--drop", action="store_true", help="drop the tag NAME")
    commands.add_parser("tags", parents=[dbt], help="the tags")
    branch = commands.add_parser("branch", parents=[dbt], help="create, publish, drop or list branches")
    branch.add_argument("action", choices=["create", "publish", "drop", "list"])
    branch.add_argument("name", metavar="NAME", nargs="?")
    branch.add_argument("--from", dest="fork", metavar="TAG|TXN", help="create: a tag or a transaction id")
    return top


def dbt_arguments(argv: Sequence[str] | None = None) -> list[str]:
    """The `dbt run-operation` command line that answers `lakehistory` with these arguments."""
    args = vars(parser().parse_args(argv))
    command = args.pop("command")
    dbt: list[str] = []
    for name in ("project_dir", "profiles_dir", "target"):
        value = args.pop(name)
        if value is not None:
            dbt += [f"--{name.replace('_', '-')}", value]
    if command == "tag":  # writes: the run-operations themselves
        if args["drop"]:
            if args["txn"] is not None or args["note"] is not None:
                parser().error("tag --drop NAME takes no TXN and no --note")
            return ["run-operation", "lakehistory.drop_tag", "--args", json.dumps({"name": args["name"]}), *dbt]
        asked = {k: args[k] for k in ("name", "txn", "note") if args[k] is not None}
        return ["run-operation", "lakehistory.tag", "--args", json.dumps(asked), *dbt]
    if command == "branch" and args["action"] == "list":
        if args["name"] is not None or args["fork"] is not None:
            parser().error("branch list takes no NAME and no --from")
        return ["run-operation", "lakehistory.list_branches", *dbt]
    if command == "branch":
        if args["name"] is None:
            parser().error(f"branch {args['action']} NAME: the branch's name is missing")
        return ["run-operation", f"lakehistory.{args['action']}_branch", "--args", json.dumps(_branch_args(args)), *dbt]
    request = {"command": command, "args": args}
    return ["run-operation", "lakehistory.inspect", "--args", json.dumps(request), "--quiet", *dbt]


def _branch_args(args: dict[str, Any]) -> dict[str, Any]:
    """A branch command's run-operation arguments: `--from` is a transaction id or a tag."""
    asked: dict[str, Any] = {"name": args["name"]}
    fork = args["fork"]
    if fork is not None:
        if args["action"] != "create":
            parser().error("branch: --from is for create only")
        asked.update({"txn": int(fork)} if fork.isdigit() else {"tag": fork})
    return asked


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["destination", "sources"]:
        from lakehistory.destination import project

        return project.main(argv[2:])
    if argv[:1] == ["destination"]:
        from lakehistory.destination import server

        return server.main(argv[1:])
    arguments = dbt_arguments(argv)  # --help and usage errors end here, before dbt loads
    from dbt.cli.main import dbtRunner

    result = dbtRunner().invoke(arguments)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
