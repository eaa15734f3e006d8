"""Seeded generator of realistic change batches for the CRMP climate-station demo domain.

- `domain`: the five tables as data (columns with Spark SQL types, keys, foreign keys).
- `SourceSimulator` / `GeneratorConfig`: the simulated source, one sync at a time, producing
  `lakehistory.landing.batch.Batch` objects exactly as Fivetran's history mode sends them.
- `generate`: simulate and land batches (and daily full extracts) under a landing root, all syncs
  or one; `landed_syncs`: how many syncs a landing root already holds.
"""

from lakehistory_tools.generator.batches import BatchStats, Events, build_batch
from lakehistory_tools.generator.domain import TABLE_NAMES, TABLES, ForeignKey, TableDef, get_table
from lakehistory_tools.generator.land import GenerateSummary, extract_path, generate, landed_syncs, write_extract
from lakehistory_tools.generator.metadata import Rates
from lakehistory_tools.generator.simulator import GeneratorConfig, SourceSimulator, batch_id

__all__ = [
    "TABLES",
    "TABLE_NAMES",
    "BatchStats",
    "Events",
    "ForeignKey",
    "GenerateSummary",
    "GeneratorConfig",
    "Rates",
    "SourceSimulator",
    "TableDef",
    "batch_id",
    "build_batch",
    "extract_path",
    "generate",
    "get_table",
    "landed_syncs",
    "write_extract",
]
