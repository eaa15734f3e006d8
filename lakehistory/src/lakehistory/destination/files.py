"""Fivetran's batch files as a destination receives them: each file encrypted on its own with
AES-256 in CBC mode (PKCS5 padding, the IV in the file's first 16 bytes, the key in the request),
compressed with zstd or gzip or not at all, CSV as Jackson writes it (a header, `"` quotes with
doubled quotes inside, backslash an ordinary character).

Everything here streams: a file is decrypted block by block as it is read, and no plaintext byte
is ever written to the server's disk. Errors name the file and, where there is one, the row and
column, and never a value or a key."""

from __future__ import annotations

import csv
import hashlib
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import zstandard
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

CHUNK = 1 << 20
IV_BYTES = 16
KEY_BYTES = 32  # AES-256


class BatchFileError(Exception):
    """A batch file the server cannot take; the message names the file and never a value."""


@dataclass(frozen=True)
class FileParams:
    compression: str  # "off", "zstd" or "gzip"
    encrypted: bool
    null_string: str
    unmodified_string: str


def _ciphertext(source: BinaryIO) -> Iterator[bytes]:
    yield from iter(lambda: source.read(CHUNK), b"")


def decrypted(source: BinaryIO, key: bytes | None, name: str) -> Iterator[bytes]:
    """The file's bytes as they were before Fivetran encrypted them (as stored when `key` is None)."""
    if key is None:
        yield from _ciphertext(source)
        return
    if len(key) != KEY_BYTES:
        raise BatchFileError(f"{name}: its key is {len(key)} bytes long; AES-256 takes a key of {KEY_BYTES}")
    iv = source.read(IV_BYTES)
    if len(iv) < IV_BYTES:
        raise BatchFileError(f"{name}: shorter than the 16-byte IV an encrypted batch file begins with")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    unpadder = padding.PKCS7(algorithms.AES.block_size).unpadder()
    for chunk in _ciphertext(source):
        yield unpadder.update(decryptor.update(chunk))
    try:
        yield unpadder.update(decryptor.finalize()) + unpadder.finalize()
    except ValueError:  # a length that is no multiple of the block, or padding that is not PKCS5
        raise BatchFileError(f"{name}: does not decrypt with the key the request gives for it") from None


def decompressed(chunks: Iterator[bytes], compression: str, name: str) -> Iterator[bytes]:
    """The plain bytes of a stream compressed as `compression` says (zstd frames one after another
    included); a cut or corrupt stream fails."""
    if compression == "off":
        yield from chunks
        return
    new = (lambda: zstandard.ZstdDecompressor().decompressobj()) if compression == "zstd" else _gzip
    codec: Any = new()
    try:
        for chunk in chunks:
            while chunk:
                yield codec.decompress(chunk)
                chunk = codec.unused_data if codec.eof else b""
                if chunk:
                    codec = new()
    except (zstandard.ZstdError, zlib.error):
        raise BatchFileError(
            f"{name}: does not hold {compression} data (or does not decrypt with the key the request gives for it)"
        ) from None
    if not codec.eof:
        raise BatchFileError(f"{name}: its {compression} data is cut short")


def _gzip() -> Any:
    return zlib.decompressobj(wbits=31)


class _Stream(io.RawIOBase):
    """A readable file over an iterator of byte chunks, for io.TextIOWrapper; each chunk read
    through a view, never copied whole (a zstd chunk inflates to megabytes)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._rest, self._at = chunks, memoryview(b""), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._at >= len(self._rest):
            try:
                self._rest, self._at = memoryview(next(self._chunks)), 0
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._rest) - self._at)
        buffer[:n] = self._rest[self._at : self._at + n]
        self._at += n
        return n


class Digest:
    """Counts and hashes the plain bytes passing through, for a request's fingerprint."""

    def __init__(self) -> None:
        self.sha256 = hashlib.sha256()

    def through(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.sha256.update(chunk)
            yield chunk


def csv_rows(plain: Iterator[bytes], name: str) -> Iterator[list[str]]:
    """The CSV's records, header first. A record whose field count differs from the header's, or
    bytes that are not UTF-8, stop the stream with an error naming the row (1 = the first after the
    header)."""
    text = io.TextIOWrapper(io.BufferedReader(_Stream(plain), CHUNK), encoding="utf-8", newline="")
    reader = csv.reader(text, strict=True)  # quotes doubled, no escape character: Jackson's CSV
    try:
        header = next(reader, None)
        if header is None:
            raise BatchFileError(f"{name}: empty, where a CSV batch file begins with its header")
        yield header
        for number, record in enumerate(reader, start=1):
            if len(record) != len(header):
                raise BatchFileError(
                    f"{name}: row {number} has {len(record)} fields where the header has {len(header)}"
                )
            yield record
    except UnicodeDecodeError:
        raise BatchFileError(
            f"{name}: not UTF-8 text (or does not decrypt with the key the request gives for it)"
        ) from None
    except csv.Error as exc:
        raise BatchFileError(f"{name}: row {reader.line_num}: not CSV ({exc})") from None


def open_batch_file(path: str, name: str) -> BinaryIO:
    """A batch file the request names: a path on the server's machine, where Fivetran wrote it."""
    try:
        return Path(path).open("rb")
    except OSError as exc:
        raise BatchFileError(f"{name}: cannot be read ({exc.strerror})") from None
