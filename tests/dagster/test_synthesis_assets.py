"""cot_steps -> reasoning_set / chinese_gui_set / task_difficulty in a real in-process run,
their blocking checks evaluated on the shards, and `trajforge stats` on both sets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from dagster_project.assets.curate import curated_steps
from dagster_project.assets.raw import raw_steps
from dagster_project.assets.synthesis import chinese_gui_set, cot_steps, reasoning_set, task_difficulty
from dagster_project.checks_synthesis import CHECKS_OF, SYNTHESIS_CHECKS
from dagster_project.resources import StorageResource, VLMResource
from tests.export.shard_fixtures import build_store

ASSETS = [
    raw_steps,
    curated_steps,
    cot_steps,
    reasoning_set,
    chinese_gui_set,
    task_difficulty,
    *SYNTHESIS_CHECKS,
]


def test_sets_materialise_with_checks_and_show_their_mix(tmp_path):
    data = tmp_path / "data"
    build_store(data / "raw")  # 12 trajectories (8 en, 4 zh) of 2-5 steps
    result = dg.materialize(
        ASSETS,
        resources={"storage": StorageResource(root=str(data)), "vlm": VLMResource(kind="none")},
        run_config={"ops": {"curated_steps": {"config": {"min_steps": 1, "drop_failed": False}}}},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    evals = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert len(evals) == 2 * len(CHECKS_OF) + 2, evals  # + the two placeholder checks
    for name in ("reasoning_set_no_placeholder_targets", "chinese_gui_set_no_placeholder_targets"):
        assert evals[name].passed and evals[name].metadata["targets_with_placeholder"].value == 0
    # Template thoughts: the alignment checks did not run, a warning (not a pass, no block).
    not_run = {"reasoning_set_alignment_rate", "chinese_gui_set_alignment_rate"}
    assert all(e.passed for name, e in evals.items() if name not in not_run), evals
    for name in not_run:
        e = evals[name]
        assert not e.passed and e.severity == dg.AssetCheckSeverity.WARN, e
        assert e.metadata["status"].value == "not run"
        assert e.metadata["detail"].value.startswith("not run")

    cot = result.asset_materializations_for_node("cot_steps")[0].metadata
    kept = pq.read_metadata(data / "curated" / "steps.parquet").num_rows
    assert cot["backend"].value == "template" and 0 < cot["steps"].value <= kept
    rs = result.asset_materializations_for_node("reasoning_set")[0].metadata
    assert rs["modes"].value["reason"] == rs["modes"].value["direct"] == rs["steps"].value
    assert rs["thought_backends"].value == {"template": rs["samples"].value}
    manifest = json.loads((data / "shards" / "reasoning_set" / "manifest.json").read_text())
    assert manifest["summary"]["thought_backend_share"] == {"template": 1.0}
    zh = result.asset_materializations_for_node("chinese_gui_set")[0].metadata
    assert set(zh["language_share"].value) == {"zh"} and zh["samples"].value > 0
    diff = pq.read_table(data / "synthesis" / "difficulty.parquet").to_pylist()
    assert diff and all(0.0 <= r["score"] <= 1.0 for r in diff)

    cli = Path(sys.executable).parent / "trajforge"
    for name, langs in (("reasoning_set", {"en", "zh"}), ("chinese_gui", {"zh"})):
        out = subprocess.run(
            [str(cli), "stats", str(data / "shards" / name), "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        stats = json.loads(out)
        assert stats["modes"]["reason"] == stats["modes"]["direct"] > 0
        assert set(stats["languages"]) == langs
