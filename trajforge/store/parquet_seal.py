"""Sealed Parquet parts: a sha256 of the whole file, checked before decoding.

Parquet's page checksums cover page data only. A damaged page header or footer
(a column's type or time unit, a row count, the Arrow schema) can still decode,
to other values. A sealed part carries the sha256 of all its other bytes in the
gap between its last page and its footer. Readers find pages through the
footer's absolute offsets, so any Parquet reader (pyarrow, DuckDB, Spark)
ignores the gap; the store's readers verify it first.

The footer also says the part is sealed (key `trajforge.sealed`), so a damaged
seal is told apart from a part written before seals (which is read unverified).
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.errors import SchemaError

MARK = b"TFSEAL01"
SEALED_KEY = b"trajforge.sealed"
_SEAL_LEN = len(MARK) + 32
_TAIL = 8  # footer length (4 bytes, little-endian) + b"PAR1"


def parquet_bytes(table: pa.Table) -> bytes:
    """`table` as sealed Parquet bytes (zstd, page checksums)."""
    metadata = {**(table.schema.metadata or {}), SEALED_KEY: b"1"}
    sink = pa.BufferOutputStream()
    pq.write_table(
        table.replace_schema_metadata(metadata), sink, compression="zstd", write_page_checksum=True
    )
    return seal(sink.getvalue().to_pybytes())


def seal(data: bytes) -> bytes:
    """Insert MARK + sha256(the rest) just before the footer."""
    at = _footer_start(data)
    if at is None:
        raise ValueError("not a Parquet file: cannot seal it")
    digest = hashlib.sha256(data).digest()
    return data[:at] + MARK + digest + data[at:]


def verify(data: bytes, source: str) -> None:
    """Raise SchemaError naming `source` unless `data` is an intact part."""
    at = _footer_start(data)
    if at is None:
        raise damaged(source, "no Parquet footer")
    if at >= _SEAL_LEN and data[at - _SEAL_LEN : at - 32] == MARK:
        body, digest = data[: at - _SEAL_LEN], data[at - 32 : at]
        if hashlib.sha256(body + data[at:]).digest() != digest:
            raise damaged(source, "its sha256 does not match the seal")
        return
    if SEALED_KEY in _footer_keys(data, source):
        raise damaged(source, "its seal is missing or damaged")


def damaged(source: str, why: str) -> SchemaError:
    # Committed parts are written atomically: a damaged one means the disk (or a
    # copy) changed it. Say which file, so it can be restored or removed.
    return SchemaError(f"damaged Parquet file ({why})", source=source, field="file")


def _footer_start(data: bytes) -> int | None:
    if len(data) < 4 + _TAIL or data[-4:] != b"PAR1" or data[:4] != b"PAR1":
        return None
    at = len(data) - _TAIL - int.from_bytes(data[-8:-4], "little")
    return at if at >= 4 else None


def _footer_keys(data: bytes, source: str) -> dict:
    try:
        return pq.read_metadata(pa.BufferReader(data)).metadata or {}
    except (pa.ArrowException, OSError) as exc:
        raise damaged(source, str(exc)) from exc
