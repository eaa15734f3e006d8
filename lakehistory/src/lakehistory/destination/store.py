"""Where the destination writes: a folder of its machine, or a prefix of an S3 bucket
(`s3a://bucket/prefix`, as Spark names it), through one interface (pyarrow's file systems).

On S3 the endpoint comes from `LAKEHISTORY_S3_ENDPOINT` (empty: AWS), the credentials and region
from the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`), as the dbt
profile's target takes them (docs/deployment.md). No secret is read from a request."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

from pyarrow import fs


class StoreError(Exception):
    """A landing root the destination cannot use."""


class Store:
    def __init__(self, root: str) -> None:
        parsed = urlparse(root)
        if parsed.scheme in ("s3", "s3a"):
            if not parsed.netloc:
                raise StoreError(f"landing root {root!r} names no bucket")
            self.filesystem: Any = _s3()
            self.base = f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")
            self.uri = f"s3a://{self.base}"
            self.atomic_rename = False
        elif parsed.scheme in ("", "file"):
            path = parsed.path if parsed.scheme == "file" else root
            if not os.path.isabs(path):
                raise StoreError(f"landing root {root!r} is not an absolute path")
            self.filesystem = fs.LocalFileSystem()
            self.base = os.path.normpath(path)
            self.uri = self.base
            self.atomic_rename = True
        else:
            raise StoreError(f"landing root {root!r}: a folder (an absolute path) or s3a://bucket/prefix")

    def path(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def open_output(self, path: str) -> Any:
        """A binary stream that writes the file `path` (its folder made when needed)."""
        self.filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
        return self.filesystem.open_output_stream(path, compression=None)

    def write_text(self, path: str, text: str) -> None:
        """Write a small file so that a reader sees all of it or the one before: a rename on a
        folder of this machine, one PUT on S3."""
        if not self.atomic_rename:
            with self.open_output(path) as out:
                out.write(text.encode("utf-8"))
            return
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        with self.open_output(temporary) as out:
            out.write(text.encode("utf-8"))
        os.replace(temporary, path)

    def read_text(self, path: str) -> str | None:
        try:
            with self.filesystem.open_input_stream(path, compression=None) as source:
                return bytes(source.read()).decode("utf-8")
        except FileNotFoundError:
            return None

    def exists(self, path: str) -> bool:
        return bool(self.filesystem.get_file_info(path).type != fs.FileType.NotFound)

    def folders(self, path: str) -> list[str]:
        """The names of the folders in `path` (none when it does not exist)."""
        selector = fs.FileSelector(path, allow_not_found=True)
        return sorted(i.base_name for i in self.filesystem.get_file_info(selector) if i.type == fs.FileType.Directory)

    def files(self, path: str) -> list[str]:
        """The names of the files in the folder `path` (none when it does not exist)."""
        selector = fs.FileSelector(path, allow_not_found=True)
        return sorted(i.base_name for i in self.filesystem.get_file_info(selector) if i.type == fs.FileType.File)

    def remove_file(self, path: str) -> None:
        self.filesystem.delete_file(path)

    def remove(self, path: str) -> None:
        """Remove a folder and everything in it; nothing when it does not exist."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_dir(path)

    def publish(self, built: str, final: str, files: Sequence[str]) -> None:
        """Move the finished batch folder `built` to `final`, whole: one rename on this machine;
        on S3, which has no rename, each file copied, the manifest (last of `files`) last, so a
        reader never takes a batch without all its files."""
        if self.atomic_rename:
            self.filesystem.create_dir(final.rsplit("/", 1)[0], recursive=True)
            os.rename(built, final)
            return
        for name in files:
            self.filesystem.copy_file(f"{built}/{name}", f"{final}/{name}")
        self.remove(built)


def _s3() -> Any:
    endpoint = os.environ.get("LAKEHISTORY_S3_ENDPOINT", "")
    options: dict[str, Any] = {"region": os.environ.get("AWS_REGION", "us-east-1")}
    if endpoint:
        parsed = urlparse(endpoint)
        options |= {"endpoint_override": parsed.netloc or endpoint, "scheme": parsed.scheme or "https"}
    return fs.S3FileSystem(**options)
