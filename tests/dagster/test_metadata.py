"""raw_steps, curated_steps and web_shards carry their plots and tables in a real in-process run."""

from __future__ import annotations

import base64
import io
import re

import dagster as dg
from PIL import Image

from dagster_project.assets.curate import curated_steps
from dagster_project.assets.export import web_shards
from dagster_project.assets.raw import raw_steps
from dagster_project.resources import StorageResource, VLMResource
from tests.export.shard_fixtures import build_store
from trajforge.report.plots import MAX_PNG_BYTES

PNG_URI = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")
PLOTS = {"action_histogram", "steps_per_trajectory", "language_share", "platform_share", "app_outcome"}


def _check_plots(meta, names):
    for name in names:
        value = meta[name]
        assert isinstance(value, dg.MarkdownMetadataValue), name
        images = PNG_URI.findall(value.md_str)
        assert images, name
        for b64 in images:
            png = base64.b64decode(b64)
            assert len(png) < MAX_PNG_BYTES
            with Image.open(io.BytesIO(png)) as im:
                im.verify()


def test_raw_steps_and_web_shards_carry_plots_and_tables(tmp_path):
    data = tmp_path / "data"
    build_store(data / "raw")  # the export fixtures' store stands in for a crawl
    # Curation keeps the fixtures' short and failed runs here; the fixtures' drawn
    # screens still repeat, so the shards hold what curation kept.
    result = dg.materialize(
        [raw_steps, curated_steps, web_shards],
        resources={"storage": StorageResource(root=str(data)), "vlm": VLMResource(kind="none")},
        run_config={
            "ops": {
                "web_shards": {"config": {"max_samples_per_shard": 5}},
                "curated_steps": {"config": {"min_steps": 1, "drop_failed": False}},
            }
        },
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    cur = result.asset_materializations_for_node("curated_steps")[0].metadata
    stages = cur["stage_counts"].value
    assert list(stages) == ["read", "judge", "score", "decide", "scrub", "write"]
    assert (
        stages["score"]["steps"]
        == stages["decide"]["steps_kept"] + sum(stages["decide"]["steps_dropped"].values())
        == stages["write"]["step_rows"]
    )
    _check_plots(cur, {"drops_plot", "phash_distance_histogram"})
    assert cur["steps_in"].value == 42 == cur["steps_kept"].value + cur["steps_dropped"].value

    raw = result.asset_materializations_for_node("raw_steps")[0].metadata
    _check_plots(raw, PLOTS)
    assert "split_sizes" not in raw and "difficulty" not in raw
    assert raw["summary"].value["steps_per_trajectory"] == {"2": 3, "3": 3, "4": 3, "5": 3}
    assert raw["summary"].value["languages"] == {"en": 8, "zh": 4}
    table = raw["app_outcome_table"]
    assert isinstance(table, dg.TableMetadataValue)
    assert [c.name for c in table.schema.columns] == ["app", "failure", "success", "total"]
    assert [r.data for r in table.records] == [
        {"app": "mail", "failure": 3, "success": 3, "total": 6},
        {"app": "shop", "failure": 0, "success": 6, "total": 6},
    ]

    shards = result.asset_materializations_for_node("web_shards")[0].metadata
    _check_plots(shards, PLOTS | {"split_sizes"})
    assert "difficulty" not in shards
    kept_traj, kept_steps = cur["trajectories_kept"].value, cur["steps_kept"].value
    assert 0 < kept_steps < 42 and shards["trajectories"].value == kept_traj
    assert shards["steps"].value == kept_steps
    splits = shards["summary"].value["splits"]
    assert sum(s["steps"] for s in splits.values()) == kept_steps
    assert shards["shards"].value == sum(s["shards"] for s in splits.values()) >= kept_steps / 5
    assert "| mail |" in shards["app_outcome"].md_str
