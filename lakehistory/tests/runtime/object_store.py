"""The tests' use of the object store (lakehistory_tools.object_store): its buckets, and test
projects whose landing root is in one of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness import DbtProject, copy_project, unique_schema
from lakehistory_tools.object_store import Store

# The Connect tests' buckets: the server's warehouse, and the landing roots of their projects.
WAREHOUSE = "s3a://lakehouse/warehouse"
LANDING_BUCKET = "landing"
BUCKETS = ("lakehouse", LANDING_BUCKET)


@dataclass(frozen=True)
class StoreLanding:
    """Test projects whose landing root is a prefix of the store's landing bucket."""

    store: Store
    bucket: str

    def project(self, folder: Path, label: str) -> DbtProject:
        """A copy of the demo project on the `connect` target, reading its landing from the store."""
        schema = unique_schema(label)
        return DbtProject(copy_project(folder), schema, "connect", landing_root=f"s3a://{self.bucket}/{schema}")

    def copy(self, project: DbtProject) -> int:
        """The project's landed batches into its landing root, as a connector lands them there
        (the tests' writer writes them to a local folder first); returns the files copied."""
        return self.store.upload(project.landing, project.landing_root)
