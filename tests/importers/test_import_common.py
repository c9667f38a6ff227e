"""What every format shares: idempotent re-import, the quarantine file, the CLI command."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from schemas.errors import SchemaError
from trajforge.cli import app
from trajforge.importers import IMPORTERS, import_path
from trajforge.store.raw import RawStore

from .conftest import SAMPLES, load

runner = CliRunner()


def test_registry_names():
    assert sorted(IMPORTERS) == [
        "agentnet",
        "aitz",
        "android_control",
        "android_world",
        "autoglm",
        "gui_odyssey",
        "guiact",
        "mind2web",
        "os_genesis",
    ]


@pytest.mark.parametrize(
    "fmt, path, kw",
    [
        ("aitz", SAMPLES / "aitz", {}),
        ("guiact", SAMPLES / "guiact", {"screen_size": (1280, 720)}),
        ("agentnet", SAMPLES / "opencua_agentnet" / "agentnetbench_sample_data", {}),
    ],
)
def test_reimport_adds_nothing(store, fmt, path, kw):
    first = import_path(fmt, path, store, **kw)
    again = import_path(fmt, path, store, **kw)
    assert first.imported > 0
    assert (again.imported, again.steps, again.skipped) == (0, 0, first.imported)
    trajs, steps = load(store, fmt)
    assert len(trajs) == first.imported
    assert sum(len(s) for s in steps.values()) == first.steps
    # every trajectory id is stable: trajectory_id_for(format, episode id)
    assert store.committed_ids(f"import/{fmt}") == set(trajs)


def test_unknown_format_and_missing_path(store, tmp_path):
    with pytest.raises(SchemaError, match="unknown format"):
        import_path("aitw_tfrecord", SAMPLES / "aitz", store)
    with pytest.raises(SchemaError, match="no such file"):
        import_path("aitz", tmp_path / "nope", store)


def test_cli_import(tmp_path):
    data = tmp_path / "data"
    result = runner.invoke(app, ["import", "aitz", str(SAMPLES / "aitz"), "--data", str(data)])
    assert result.exit_code == 0, result.output
    assert "imported 1 (4 steps)" in result.stdout and "quarantined: 0" in result.stdout
    assert RawStore(data / "raw").committed_ids("import/aitz")
    again = runner.invoke(app, ["import", "aitz", str(SAMPLES / "aitz"), "--data", str(data)])
    assert "imported 0 (0 steps)" in again.stdout and "already there: 1" in again.stdout


def test_cli_import_reports_the_quarantine(tmp_path):
    q = tmp_path / "q.jsonl"
    result = runner.invoke(
        app,
        [
            "import",
            "guiact",
            str(SAMPLES / "guiact"),
            "--data",
            str(tmp_path / "data"),
            "--quarantine",
            str(q),
            "--screen-size",
            "1280x720",
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"see {q}" in result.output
    entries = [json.loads(line) for line in q.read_text().splitlines()]
    assert len(entries) == 5 and all(e["source"] and e["record"] and e["field"] for e in entries)
    bad = runner.invoke(app, ["import", "nope", str(SAMPLES / "aitz")])
    assert bad.exit_code == 2 and "unknown format" in bad.output
    bad = runner.invoke(app, ["import", "aitz", str(SAMPLES / "aitz"), "--screen-size", "big"])
    assert bad.exit_code == 2 and "WIDTHxHEIGHT" in bad.output
