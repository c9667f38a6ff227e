"""Report figures on the known fixture store, and the PNGs they render to."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import webdataset as wds
from PIL import Image

from schemas.errors import SchemaError
from trajforge.publish.export import export_shards
from trajforge.publish.shards import iter_tar_samples, read_manifest
from trajforge.read.stats import shard_stats
from trajforge.report import plots
from trajforge.report.figures import raw_summary, shard_summary, summary_markdown
from trajforge.store.consolidate import consolidate

PNG_URI = re.compile(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)")
COMMON = (
    "trajectories",
    "steps",
    "verified_success",
    "action_types",
    "steps_per_trajectory",
    "steps_per_trajectory_stats",
    "languages",
    "platforms",
    "apps",
    "outcomes",
    "app_outcome",
)


@pytest.fixture(scope="module")
def dirs(built, tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    consolidate(built.store, root / "raw_steps")
    export_shards(built.store, root / "shards", dataset="fixture", max_samples_per_shard=5)
    return root / "raw_steps", root / "shards"


def pngs(markdown: str) -> list[bytes]:
    return [base64.b64decode(m) for m in PNG_URI.findall(markdown)]


def test_raw_figures_match_the_fixture(built, dirs):
    s = raw_summary(dirs[0])
    # Known by construction (tests/export/shard_fixtures.py): 12 trajectories of 2..5 steps.
    assert s["trajectories"] == 12 and s["steps"] == 42 == built.num_steps
    assert s["steps_per_trajectory"] == {"2": 3, "3": 3, "4": 3, "5": 3}
    assert s["steps_per_trajectory_stats"] == {"min": 2, "median": 3.5, "mean": 3.5, "max": 5}
    assert s["languages"] == {"en": 8, "zh": 4}
    assert s["platforms"] == {"web": 11, "android": 1}
    assert s["app_outcome"] == {"mail": {"failure": 3, "success": 3}, "shop": {"success": 6}}
    assert s["outcomes"] == {"success": 9, "failure": 3}
    assert s["verified_success"] == 9  # 6 by the state verifier, 3 by the judge
    # Counted independently from the records the fixture wrote.
    expected = Counter(st.action.type.value for steps in built.steps.values() for st in steps)
    assert s["action_types"] == dict(expected) and s["action_types"]["tap"] == 5
    assert list(s["action_types"]) == sorted(expected, key=lambda k: (-expected[k], k))
    assert "difficulty" not in s  # the field does not exist yet: skipped silently


def test_shard_figures_equal_the_raw_ones_plus_split_sizes(dirs):
    raw, shards = raw_summary(dirs[0]), shard_summary(dirs[1])
    assert {k: shards[k] for k in COMMON} == {k: raw[k] for k in COMMON}
    manifest = read_manifest(dirs[1])
    splits = shards["splits"]
    assert set(splits) == set(manifest["splits"])
    assert sum(v["trajectories"] for v in splits.values()) == 12
    assert sum(v["steps"] for v in splits.values()) == 42
    assert sum(v["shards"] for v in splits.values()) == len(manifest["shards"])
    assert sum(v["bytes"] for v in splits.values()) == sum(s["bytes"] for s in manifest["shards"])
    assert splits == {
        k: {**v, "bytes": splits[k]["bytes"]} for k, v in shard_stats(dirs[1])["splits"].items()
    }


def _raw_with_difficulty(src: Path, dst: Path, values) -> Path:
    shutil.copytree(src, dst)
    table = pq.read_table(dst / "trajectories.parquet")
    pq.write_table(table.append_column("difficulty", pa.array(values)), dst / "trajectories.parquet")
    return dst


def test_difficulty_scores_are_binned_when_present(dirs, tmp_path):
    scores = [i / 12 for i in range(12)]  # 0, 0.083, ... 0.917
    s = raw_summary(_raw_with_difficulty(dirs[0], tmp_path / "r", scores))["difficulty"]["scores"]
    assert s["count"] == 12 and s["min"] == 0.0 and s["max"] == pytest.approx(11 / 12)
    assert s["mean"] == pytest.approx(sum(scores) / 12, abs=1e-4)
    assert sum(s["histogram"].values()) == 12 and len(s["histogram"]) == 10
    assert s["histogram"]["0.00-0.10"] == 2 and s["histogram"]["0.90-1.00"] == 1


def test_difficulty_struct_and_levels(dirs, tmp_path):
    structs = [{"score": 0.95, "features": 3} if i < 4 else None for i in range(12)]
    s = raw_summary(_raw_with_difficulty(dirs[0], tmp_path / "r", structs))["difficulty"]
    assert s["scores"]["count"] == 4 and s["scores"]["histogram"]["0.90-1.00"] == 4
    # Levels in the shards' JSON (a later issue's field), counted per trajectory.
    out = tmp_path / "shards"
    shutil.copytree(dirs[1], out)
    for shard in read_manifest(out)["shards"]:
        path = out / shard["name"]
        samples = list(iter_tar_samples(path))
        with wds.TarWriter(str(path)) as w:
            for key, sample in samples:
                j = sample["json"]
                j["difficulty"] = "hard" if j["app"] == "shop" else "easy"
                w.write(
                    {
                        "__key__": key,
                        "json": json.dumps(j).encode(),
                        **{k: v for k, v in sample.items() if k != "json"},
                    }
                )
    d = shard_summary(out)["difficulty"]
    assert d == {"levels": {"easy": 6, "hard": 6}}
    md = summary_markdown(shard_summary(out))["difficulty"]
    assert len(pngs(md)) == 1


def test_markdown_holds_small_decodable_pngs_and_tables(dirs):
    raw_md = summary_markdown(raw_summary(dirs[0]))
    shard_md = summary_markdown(shard_summary(dirs[1]))
    assert set(raw_md) == {
        "action_histogram",
        "steps_per_trajectory",
        "language_share",
        "platform_share",
        "app_outcome",
    }
    assert set(shard_md) == set(raw_md) | {"split_sizes"}
    for name, md in shard_md.items():
        images = pngs(md)
        assert len(images) == 1, name
        assert len(images[0]) < plots.MAX_PNG_BYTES
        with Image.open(io.BytesIO(images[0])) as im:
            assert im.format == "PNG" and im.width >= 300
            im.load()
    assert "| mail | 3 | 3 | 6 |" in shard_md["app_outcome"]
    assert "| shop | 0 | 6 | 6 |" in shard_md["app_outcome"]
    assert "min 2, median 3.5, mean 3.5, max 5" in shard_md["steps_per_trajectory"]
    assert re.search(r"\| train \| \d+ \| \d+ \| \d+ \| \d+\.\d\d \|", shard_md["split_sizes"])


def test_long_tails_fold_and_big_charts_stay_small():
    counts = {f"a_rather_long_category_name_{i:03d}": 1000 - i for i in range(300)}
    folded = plots.fold_tail(counts)
    assert len(folded) == plots.MAX_BARS and folded[-1] == ("other (281)", sum(range(1000 - 299, 1000 - 18)))
    assert sum(v for _, v in folded) == sum(counts.values())
    assert len(plots.bar_png(counts, "many", share=True)) < plots.MAX_PNG_BYTES
    hist = {str(i): (i * 7919) % 97 for i in range(1, 61)}
    assert len(plots.histogram_png(hist, "long", "steps")) < plots.MAX_PNG_BYTES


def test_missing_raw_steps_names_the_file(tmp_path):
    with pytest.raises(SchemaError, match=r"trajectories\.parquet.*materialise raw_steps"):
        raw_summary(tmp_path)


def test_an_empty_store_still_gets_its_report(tmp_path):
    from trajforge.store.raw import RawStore

    consolidate(RawStore(tmp_path / "raw"), tmp_path / "raw_steps")
    s = raw_summary(tmp_path / "raw_steps")
    assert s["trajectories"] == s["steps"] == 0 and s["steps_per_trajectory"] == {}
    md = summary_markdown(s)
    assert all(len(pngs(v)) == 1 for v in md.values())


def test_step_counts_plot_on_a_gap_free_axis():
    assert plots.int_bins({"2": 3, "5": 1}) == {"2": 3, "3": 0, "4": 0, "5": 1}
    wide = plots.int_bins({"1": 1, "50": 2, "200": 4}, max_bars=40)
    assert len(wide) == 40 and sum(wide.values()) == 7
    assert list(wide)[0] == "1-5" and wide["1-5"] == 1 and list(wide)[-1] == "196-200"
    assert plots.int_bins({}) == {}
