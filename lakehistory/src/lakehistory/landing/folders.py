"""The landing as a run reads it: the names of each table's batch folders, then the manifests of
the pending ones only.

A landing root keeps every batch ever landed, and on object storage each request costs time and
money: a run must not list every batch folder's files and read every manifest to find the few
batches not yet applied. So a run learns the folders' names first (one listing of each table's
folder, a request per thousand folders on S3), asks the transactions table which of them are
applied (manifests.applied_batches_for), and reads the manifests and files of the rest.

Listing names alone takes Hadoop's FileSystem, which only a session with a JVM in this process
has (the embedded target). Through Spark Connect the listing goes through a Spark job over the
batch folders' files, which lists each folder once; the manifests read are still the pending
ones only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import SparkSession

from .spec import SAFE_NAME, BatchError, batch_error

MANIFEST = "manifest.json"


class Folders:
    """The batch folders of some tables of one landing root."""

    def __init__(self, spark: SparkSession, root: str, tables: Iterable[str]) -> None:
        self.spark, self.root = spark, root.rstrip("/")
        self.tables = sorted(set(tables))
        self._hadoop = hadoop_filesystem(spark)
        self._with_files: dict[str, set[str]] | None = None  # the Spark listing, once made
        self.names: dict[str, list[str]] = {t: self._list(t) for t in self.tables}

    def _list(self, table: str) -> list[str]:
        """The table's batch folders, by name: through Hadoop, every folder in the table's folder
        (an empty one included); through Spark, those holding a file."""
        if self._hadoop is not None:
            return sorted(name for name, is_dir in self._hadoop.list(f"{self.root}/{table}") if is_dir)
        return sorted(self._spark_listing().get(table, ()))

    def _spark_listing(self) -> dict[str, set[str]]:
        """Every table's folders that hold a file, in one Spark job."""
        if self._with_files is None:
            self._with_files = {}
            for table, folder, _ in self._files(_alternatives([_escaped(t) for t in self.tables]), "*"):
                self._with_files.setdefault(table, set()).add(folder)
        return self._with_files

    def manifests(self, wanted: Mapping[str, Iterable[str]]) -> dict[str, dict[str, bytes | BatchError | None]]:
        """For each table of `wanted`, each wanted folder: its manifest's bytes; None for a folder
        that holds no file (nothing landed there, or a batch whose files were removed); a
        BatchError for one that holds files but no manifest (incomplete, or not a batch) or whose
        name no batch can have. One Spark job reads them all (and one more for each table whose
        name holds a character a glob reads as its own)."""
        wanted = {t: sorted(set(names)) for t, names in wanted.items() if names}
        # A batch id is a plain name (spec.SAFE_NAME), which a glob reads as it is.
        safe = {t: [n for n in names if SAFE_NAME.match(n)] for t, names in sorted(wanted.items())}
        parts = {t: f"{_escaped(t)}/{{{','.join(names)}}}" for t, names in safe.items() if names}
        # Hadoop expands a glob's {a/..,b/..} before it reads escapes: a table whose name needs
        # one is read in a pattern of its own.
        plain = [part for t, part in parts.items() if _escaped(t) == t]
        patterns = ([_alternatives(plain)] if plain else []) + [part for t, part in parts.items() if _escaped(t) != t]
        found: dict[str, dict[str, bytes | BatchError | None]] = {t: {} for t in wanted}
        for pattern in patterns:
            for table, folder, content in self._files(pattern, MANIFEST, content=True):
                if folder in wanted.get(table, ()):
                    found[table][folder] = content
        for table, names in wanted.items():
            for name in names:
                if name in found[table]:
                    continue
                if not self._holds_files(table, name):
                    found[table][name] = None
                elif not SAFE_NAME.match(name):
                    found[table][name] = batch_error(name, "a batch id may hold only letters, digits and _ . = -")
                else:
                    found[table][name] = batch_error(
                        name, f"folder {table}/{name} has files but no {MANIFEST} (incomplete or not a batch)"
                    )
        return found

    def _files(self, pattern: str, leaf: str, content: bool = False) -> list[tuple[str, str, Any]]:
        """(table, folder, content or None) of each file matching the glob `root/pattern/leaf`;
        none when it matches nothing."""
        columns = ["path", "content"] if content else ["path"]
        try:
            rows = self.spark.read.format("binaryFile").load(f"{self.root}/{pattern}/{leaf}").select(*columns).collect()
        except Exception as exc:  # nothing matches the glob: no folder, or no such file in any
            if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                return []
            raise
        found = []
        for row in rows:
            table, folder = row.path.rsplit("/", 3)[-3:-1]
            found.append((table, folder, bytes(row.content) if content else None))
        return found

    def _holds_files(self, table: str, name: str) -> bool:
        if self._hadoop is None:  # the Spark listing found only folders that hold a file
            return name in self._spark_listing().get(table, ())
        return self._hadoop.holds_files(f"{self.root}/{table}/{name}")


class Hadoop:
    """Hadoop's FileSystem, through the session's JVM."""

    def __init__(self, spark: Any) -> None:
        self._path = spark._jvm.org.apache.hadoop.fs.Path
        self._conf = spark._jsparkSession.sessionState().newHadoopConf()

    def list(self, uri: str) -> list[tuple[str, bool]]:
        """(name, is a folder) of each entry of the folder `uri`; none when it does not exist."""
        path = self._path(uri)
        try:
            statuses = path.getFileSystem(self._conf).listStatus(path)
        except Exception as exc:
            if "FileNotFoundException" in str(exc):
                return []
            raise
        return [(s.getPath().getName(), bool(s.isDirectory())) for s in statuses]

    def remove(self, uri: str) -> None:
        """Delete the folder `uri` and everything in it."""
        path = self._path(uri)
        path.getFileSystem(self._conf).delete(path, True)

    def holds_files(self, uri: str) -> bool:
        """Whether the folder `uri` or a folder in it holds a file."""
        path = self._path(uri)
        try:
            return bool(path.getFileSystem(self._conf).listFiles(path, True).hasNext())
        except Exception as exc:
            if "FileNotFoundException" in str(exc):
                return False
            raise


def hadoop_filesystem(spark: SparkSession) -> Hadoop | None:
    """Hadoop's FileSystem when the session runs its JVM in this process; None over Spark Connect."""
    if getattr(spark, "_jsparkSession", None) is None:
        return None
    return Hadoop(spark)


_GLOB_SPECIAL = set("\\{}[]*?,^!")


def _escaped(name: str) -> str:
    """`name` as a literal in a Hadoop glob."""
    return "".join(f"\\{c}" if c in _GLOB_SPECIAL else c for c in name)


def _alternatives(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "{" + ",".join(parts) + "}"
