"""The curated store through the real exporter: index gaps allowed, only kept, scrubbed steps;
steps recorded without a screenshot are skipped with a count."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from filters.config import CurateConfig
from filters.pipeline import curate
from schemas.actions import Action
from schemas.records import Step
from tests.filters.conftest import EMAIL, KEPT, PHONE, _traj, build_raw, picture
from trajforge.publish.export import export_shards
from trajforge.publish.shards import iter_samples
from trajforge.read.validate import validate
from trajforge.store.raw import RawStore

SPLITS = (("train", 0.5), ("val", 0.5))


@pytest.fixture(scope="module")
def curated_dir(tmp_path_factory):
    raw = build_raw(tmp_path_factory.mktemp("raw"))
    out = tmp_path_factory.mktemp("curated")
    # The fixture's values stand for real personal data: no source declared synthetic.
    curate(raw.dir, raw.blobs, out, config=CurateConfig(synthetic_sources=()))
    return out


def test_curated_store_exports_only_kept_scrubbed_steps(curated_dir, tmp_path):
    store = RawStore(curated_dir / "store")
    res = export_shards(store, tmp_path / "shards", dataset="curated", splits=SPLITS, allow_index_gaps=True)
    verdicts = pq.read_table(curated_dir / "steps.parquet").to_pylist()
    kept = {(r["trajectory_id"], r["index"]): r for r in verdicts if r["keep"]}
    assert res.skipped == {} and res.samples == len(kept) == KEPT
    seen = {}
    for _, sample in iter_samples(tmp_path / "shards"):
        j = sample["json"]
        seen[(j["trajectory_id"], j["index"])] = sample
        assert EMAIL not in json.dumps(j, ensure_ascii=False) and PHONE not in j["task"]["instruction"]
    assert set(seen) == set(kept)
    blurred = kept[("t01_good", 1)]["screenshot_out"]
    assert seen[("t01_good", 1)]["png"] == store.blobs.get(blurred)
    assert seen[("t04_loop", 5)]["json"]["num_steps"] == 6  # index 4 (the loop) is a gap
    manifest = json.loads((tmp_path / "shards" / "manifest.json").read_text())
    assert manifest["index_gaps"] is True
    report = validate(tmp_path / "shards")  # follows the manifest
    assert report.ok, [str(p) for p in report.problems]
    strict = validate(tmp_path / "shards", allow_index_gaps=False)
    assert not strict.ok and all(p.field == "num_steps" for p in strict.problems)


def test_without_the_option_gapped_trajectories_are_quarantined(curated_dir, tmp_path):
    res = export_shards(RawStore(curated_dir / "store"), tmp_path / "strict", dataset="c", splits=SPLITS)
    # t02, t03, t04, t05, t06 lost steps; t01 kept all four.
    assert res.skipped == {"step_count_mismatch": 5} and res.samples == 4
    assert "index_gaps" not in res.manifest


def test_step_without_screenshot_is_skipped_and_counted(tmp_path):
    store = RawStore(tmp_path / "raw")
    traj = _traj("imp", 3)
    steps = [
        Step(
            trajectory_id="imp",
            index=i,
            width=64,
            height=40,
            action=Action.tap(0.5, 0.5),
            screenshot="" if i == 1 else store.blobs.put(picture(i)),
        )
        for i in range(3)
    ]
    with store.writer("imports") as w:
        w.add(traj, steps)
    res = export_shards(store, tmp_path / "shards", dataset="imp", splits=SPLITS)
    assert res.samples == 2 and res.skipped == {} and res.skipped_steps == {"no_screenshot": 1}
    assert res.manifest["totals"]["skipped_steps"] == {"no_screenshot": 1}
    lines = [json.loads(x) for x in (tmp_path / "shards" / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["trajectory_id"], q["index"], q["reason"]) for q in lines] == [("imp", 1, "no_screenshot")]
    assert validate(tmp_path / "shards").ok
