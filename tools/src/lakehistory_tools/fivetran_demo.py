"""`make demo-fivetran`: from the destination tester's input files to history tables, in one
process, each step the command a user would type, printed before it runs.

A `lakehistory destination` on a free port of 127.0.0.1, Fivetran's side (`fivetran_tester`)
sending every input file to it, `lakehistory destination sources --models` in a dbt project that
installs the package, `dbt run` of those models, and each history table's versions and current
rows. Everything lives under one folder (`$LAKEHISTORY_HOME/fivetran` by default) and the tables
in a schema of their own (`fivetran`), both made anew on every run.

    python -m lakehistory_tools.fivetran_demo [INPUT ...] [--folder DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import grpc

from lakehistory.destination.project import write_models
from lakehistory.destination.server import Server
from lakehistory.destination.store import Store
from lakehistory_tools.demo import dbt_step
from lakehistory_tools.fivetran_tester import FivetranConnection, input_files
from lakehistory_tools.project import copy_demo_project

REPOSITORY = Path(__file__).resolve().parents[3]
INPUTS = REPOSITORY / "lakehistory" / "tests" / "destination" / "inputs"
SCHEMA = "tester"
OPEN = 9223372036854775807  # valid_to of a row open in transaction time
DROP_SCHEMA = """\
{% macro drop_demo_schema() %}
    {% do adapter.drop_schema(api.Relation.create(schema=target.schema)) %}
{% endmacro %}
"""


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lakehistory_tools.fivetran_demo", description=__doc__)
    p.add_argument("inputs", nargs="*", type=Path, default=[INPUTS], metavar="INPUT", help="input files or folders")
    home = Path(os.environ.get("LAKEHISTORY_HOME", ".local"))
    p.add_argument("--folder", type=Path, default=home / "fivetran", help="where the landing and project go")
    args = p.parse_args(argv)
    folder = args.folder.resolve()
    shutil.rmtree(folder, ignore_errors=True)
    landing, project = folder / "landing", folder / "project"

    server = Server(port=0, host="127.0.0.1")
    print(f"$ lakehistory destination --port {server.port}", flush=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            fivetran = FivetranConnection(channel, {"landing_root": str(landing)}, SCHEMA)
            for path in input_files(args.inputs):
                print(f"$ python -m lakehistory_tools.fivetran_tester {path} --landing-root {landing}", flush=True)
                before = len(fivetran.sent)
                fivetran.run_file(path)
                for sent in fivetran.sent[before:]:
                    answer = sent.response.WhichOneof("response")
                    print(f"  {sent.request} {sent.table}: {answer}", flush=True)
    finally:
        server.stop(grace=30)

    copy_demo_project(REPOSITORY, project, parts=("dbt_project.yml", "profiles.yml"))
    (project / "macros").mkdir(exist_ok=True)
    (project / "macros" / "drop_demo_schema.sql").write_text(DROP_SCHEMA)
    print(f"$ lakehistory destination sources {landing} {SCHEMA} --models {project / 'models' / 'fivetran'}")
    models = write_models(Store(str(landing)), SCHEMA, SCHEMA, project / "models" / "fivetran")
    os.environ["LAKEHISTORY_SCHEMA"] = "fivetran"
    options = ["--project-dir", str(project), "--profiles-dir", str(project)]
    for step in (
        ("deps", *options, "--quiet"),
        ("run-operation", "drop_demo_schema", *options),  # the tables of a run before: a landing anew
        ("run", *options, "--select", "path:models/fivetran"),
    ):
        if not dbt_step(*step):
            return 1
    counts = " union all ".join(  # the Fivetran view: the rows open in transaction time
        f"select '{model}' as history_table, count(*) as versions, count_if(_fivetran_active) as current_rows"
        f" from {{{{ ref('{model}') }}}} where valid_to = {OPEN}"
        for model in models
    )
    if not dbt_step("show", *options, "--inline", counts, "--limit", str(len(models))):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
