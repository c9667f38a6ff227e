"""The DuckDB catalog: every example query of docs/catalog.md runs and gives the right figures."""

from __future__ import annotations

import json
import os
import re
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli import app
from trajforge.publish.export import export_shards
from trajforge.publish.shards import read_manifest
from trajforge.read.duckdb_catalog import build_catalog, is_stale, query
from trajforge.store.consolidate import consolidate

DOC = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"
SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))
runner = CliRunner()


def doc_queries() -> dict[str, str]:
    """{name: sql} of every ```sql block of the doc (each starts with `-- name: x`)."""
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    out = {}
    for sql in blocks:
        m = re.match(r"-- name: (\w+)\n", sql)
        assert m, f"a SQL block of {DOC} lacks its '-- name:' line:\n{sql}"
        out[m.group(1)] = sql
    return out


@pytest.fixture(scope="module")
def data(built, tmp_path_factory) -> Path:
    """A data root: the raw store, its consolidated tables and one export."""
    data = tmp_path_factory.mktemp("data")
    os.symlink(built.root, data / "raw")
    consolidate(built.store, data / "raw_steps")
    export_shards(
        built.store, data / "shards" / "demo", dataset="demo", splits=SPLITS, max_samples_per_shard=10
    )
    return data


@pytest.fixture(scope="module")
def db(data) -> Path:
    res = build_catalog(data)
    assert res.source == "raw_steps" and res.datasets == ["demo"] and not res.problems
    assert res.shards == len(read_manifest(data / "shards" / "demo")["shards"])
    return res.path


def rows(db, sql):
    return query(db, sql)[1]


def expected(built, name: str, data: Path):
    trajs = list(built.trajectories.values())
    steps = [s for ss in built.steps.values() for s in ss]
    app_of = {t.trajectory_id: t.app for t in trajs}
    if name == "by_app":
        return sorted(Counter(t.app for t in trajs).items())
    if name == "by_language":
        return sorted(Counter(t.task.language for t in trajs).items())
    if name == "by_action_type":
        return sorted(Counter(s.action.type.value for s in steps).items(), key=lambda kv: (-kv[1], kv[0]))
    if name == "success_rates":
        groups: dict = {}
        for t in trajs:
            groups.setdefault((t.app, t.task.language), []).append(t)
        return [
            (
                a,
                lang,
                len(ts),
                round(sum(t.outcome == "success" for t in ts) / len(ts), 3),
                round(sum(t.outcome == "success" and t.verified_by == "state" for t in ts) / len(ts), 3),
            )
            for (a, lang), ts in sorted(groups.items())
        ]
    if name == "shard_of_trajectory":
        return [shard_holding(data / "shards" / "demo", "aitw/ep.7-中")]
    if name == "shards_by_split":
        manifest = read_manifest(data / "shards" / "demo")
        return [
            (
                "demo",
                split,
                len(info["shards"]),
                info["samples"],
                round(sum(s["bytes"] for s in manifest["shards"] if s["split"] == split) / 1e6, 2),
            )
            for split, info in sorted(manifest["splits"].items())
            if info["shards"]
        ]
    if name == "actions_by_app":
        c = Counter((app_of[s.trajectory_id], s.action.type.value) for s in steps)
        return sorted(((a, t, n) for (a, t), n in c.items()), key=lambda r: (r[0], -r[2], r[1]))
    if name == "not_exported":
        return []
    if name == "steps_per_trajectory":
        groups = {}
        for t in trajs:
            groups.setdefault(t.platform, []).append(t.num_steps)
        return [(p, len(n), min(n), round(sum(n) / len(n), 2), max(n)) for p, n in sorted(groups.items())]
    raise AssertionError(f"no expected figures for the doc's query {name!r}: add them here")


def shard_holding(folder: Path, tid: str) -> tuple:
    """(dataset, shard, split, steps, path) found by reading the tars themselves."""
    for s in read_manifest(folder)["shards"]:
        path = folder / s["name"]
        with tarfile.open(path) as tar:
            n = sum(
                json.loads(tar.extractfile(m).read())["trajectory_id"] == tid
                for m in tar
                if m.name.endswith(".json")
            )
        if n:
            return ("demo", s["name"], s["split"], n, str(path))
    raise AssertionError(f"{tid} in no shard")


QUERIES = doc_queries()


def test_the_doc_has_the_issue_s_examples():
    assert {"by_app", "by_language", "by_action_type", "success_rates", "shard_of_trajectory"} <= set(QUERIES)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_doc_query_gives_the_right_figures(built, data, db, name):
    got = rows(db, QUERIES[name])
    assert got == expected(built, name, data)
    if name != "not_exported":
        assert got  # an example that returns nothing teaches nothing


def test_tables_and_columns_match_the_doc(db):
    tables = {r[0] for r in rows(db, "SELECT table_name FROM information_schema.tables")}
    assert {"trajectories", "steps", "shards", "shard_trajectories", "catalog_info"} <= tables
    doc = DOC.read_text(encoding="utf-8")
    for table in ("shards", "shard_trajectories"):
        for (col,) in rows(
            db, f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}'"
        ):
            assert f"`{col}`" in doc, f"{table}.{col} is not documented"
    cols = {
        c
        for (c,) in rows(
            db, "SELECT column_name FROM information_schema.columns WHERE table_name = 'trajectories'"
        )
    }
    assert {"language", "instruction", "template_id", "app", "outcome"} <= cols


def test_every_step_of_every_trajectory_is_in_exactly_one_split(built, db):
    got = rows(
        db,
        "SELECT trajectory_id, count(DISTINCT split), sum(steps) "
        "FROM shard_trajectories GROUP BY ALL ORDER BY 1",
    )
    assert got == sorted((tid, 1, len(s)) for tid, s in built.steps.items())


def test_raw_store_source_and_trajectories_not_exported(built, tmp_path):
    """Without raw_steps the views read the raw store; a partial export shows what is missing."""
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(built.root, data / "raw")
    export_shards(built.store, data / "shards" / "web", dataset="web", collections=["web"], splits=SPLITS)
    res = build_catalog(data)
    assert res.source == "raw"
    late = sorted(t.trajectory_id for t in built.store.iter_trajectories(["web/late"]))
    assert [r[0] for r in rows(res.path, QUERIES["not_exported"])] == late
    assert rows(res.path, "SELECT count(*) FROM steps") == [(built.num_steps,)]


def test_stale_after_a_new_export_and_the_cli_rebuilds(built, data, tmp_path):
    db = tmp_path / "cat.duckdb"
    build_catalog(data, db)
    assert not is_stale(data, db)
    other = data / "shards" / "small"
    export_shards(built.store, other, dataset="small", splits=SPLITS, max_samples_per_shard=4)
    try:
        assert is_stale(data, db)
        result = runner.invoke(
            app,
            [
                "catalog",
                "--data",
                str(data),
                "--db",
                str(db),
                "--json",
                "-q",
                "SELECT dataset, count(*) AS n FROM shards GROUP BY 1 ORDER BY 1",
            ],
        )
        assert result.exit_code == 0, result.output
        lines = [json.loads(x) for x in result.stdout.splitlines()]
        assert [x["dataset"] for x in lines] == ["demo", "small"]
        assert not is_stale(data, db)
    finally:
        import shutil

        shutil.rmtree(other)
    assert not list(tmp_path.glob(".*tmp*"))  # the temporary build file was renamed


def test_cli_build_summary_query_and_bad_sql(built, data, tmp_path):
    db = tmp_path / "c.duckdb"
    result = runner.invoke(app, ["catalog", "--data", str(data), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"catalog {db}: trajectories/steps from raw_steps, 1 dataset(s)")
    result = runner.invoke(
        app, ["catalog", "--data", str(data), "--db", str(db), "-q", QUERIES["by_language"]]
    )
    assert result.stdout.splitlines() == ["language\ttrajectories", "en\t8", "zh\t4"]
    bad = runner.invoke(
        app, ["catalog", "--data", str(data), "--db", str(db), "-q", "SELECT nope FROM shards"]
    )
    assert bad.exit_code == 2 and bad.stderr.startswith(f"error: query failed on {db}: ")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_broken_shard_folder_is_left_out_with_a_warning(data, tmp_path):
    broken = data / "shards" / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{nope")
    try:
        result = runner.invoke(app, ["catalog", "--data", str(data), "--db", str(tmp_path / "c.duckdb")])
        assert result.exit_code == 0, result.output
        assert f"warning: {broken}: left out of the catalog: file {broken / 'manifest.json'}" in result.stderr
        assert "1 dataset(s)" in result.stdout
    finally:
        (broken / "manifest.json").unlink()
        broken.rmdir()


def test_an_empty_data_root_still_answers_the_doc_queries(tmp_path):
    res = build_catalog(tmp_path)
    assert res.source == "none" and res.shards == 0
    for name, sql in QUERIES.items():
        assert rows(res.path, sql) == [], name
