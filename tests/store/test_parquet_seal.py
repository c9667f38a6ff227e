"""Sealed parts: any damaged byte is refused with the file named; outside readers see plain Parquet."""

from __future__ import annotations

import duckdb
import pyarrow.parquet as pq
import pytest

from schemas.errors import SchemaError
from tests.export.shard_fixtures import build_store
from trajforge.store.parquet_seal import MARK


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("sealed"), n_traj=4, batch_size=4).store


def read_all(store):
    return store.committed_ids(), list(store.iter_trajectories()), list(store.iter_steps())


def test_outside_readers_see_plain_parquet(store):
    part = store.trajectory_files()[0]
    assert MARK in part.read_bytes()
    ours = store.read_table(part)
    assert pq.read_table(part).equals(ours)
    rows = duckdb.connect().execute(f"select count(*) from read_parquet('{part}')").fetchone()[0]
    assert rows == ours.num_rows > 0


def test_every_changed_byte_of_a_part_is_refused_with_its_name(store):
    """Page checksums alone let about 1 change in 800 decode to other values
    (page headers, the footer); with the seal none does."""
    before = read_all(store)
    part = store.trajectory_files()[0]
    original = part.read_bytes()
    refused = 0
    try:
        for at in range(len(original)):
            part.write_bytes(original[:at] + bytes([original[at] ^ 0x01]) + original[at + 1 :])
            with pytest.raises(SchemaError) as err:
                read_all(store)
            assert err.value.source == str(part), (at, str(err.value))
            refused += 1
    finally:
        part.write_bytes(original)
    assert refused == len(original)
    assert read_all(store) == before


def test_the_ci_draw_that_decoded_to_other_values_is_refused(store):
    # The fuzz draw that failed CI: one 0x00 byte written into a trajectories
    # part, in its page headers, where page checksums do not look.
    part = store.trajectory_files()[-1]
    original = part.read_bytes()
    at = 3634 % len(original)
    if original[at] == 0:
        at += 1
    try:
        part.write_bytes(original[:at] + b"\x00" + original[at + 1 :])
        with pytest.raises(SchemaError, match="damaged Parquet file"):
            list(store.iter_trajectories())
    finally:
        part.write_bytes(original)


def test_a_part_written_before_seals_still_reads(store, tmp_path):
    part = store.step_files()[0]
    table = store.read_table(part)
    legacy = tmp_path / part.name
    pq.write_table(table.replace_schema_metadata({}), legacy, compression="zstd", write_page_checksum=True)
    assert store.read_table(legacy).equals(table.replace_schema_metadata({}))


def test_a_sealed_part_that_lost_its_seal_is_refused(store):
    part = store.step_files()[0]
    original = part.read_bytes()
    try:
        part.write_bytes(original.replace(MARK, b"X" * len(MARK)))
        with pytest.raises(SchemaError, match="seal is missing"):
            store.read_table(part)
    finally:
        part.write_bytes(original)
