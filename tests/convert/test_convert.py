"""`trajforge convert`: every format round-trips exactly (both set kinds), splits kept,
inexpressible samples listed, atomic output, clear errors, and each format's documented
schema (LLaMA-Factory, ms-swift, verl, EasyR1) and `datasets` reading hf-parquet/TRL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli import app
from trajforge.convert import FORMATS, MANIFEST, convert, output, round_trip
from trajforge.convert.source import iter_items
from trajforge.publish.shards import read_manifest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("which", ["reasoning_dir", "grounding_dir"])
def test_round_trip_is_exact(fmt, which, request, tmp_path):
    set_dir = request.getfixturevalue(which)
    m = convert(set_dir, fmt, tmp_path / fmt)
    assert round_trip(set_dir, tmp_path / fmt) == []
    items = list(iter_items(set_dir))
    assert m["samples"] + m["inexpressible_count"] == len(items) > 0
    want = {}
    for it in items:
        want[it.split] = want.get(it.split, 0) + 1
    # splits kept: every written sample in its set split, the rest listed by split
    listed = {}
    for i in m["inexpressible"]:
        listed[i["split"]] = listed.get(i["split"], 0) + 1
    assert {s: m["per_split"].get(s, 0) + listed.get(s, 0) for s in want} == want
    # the manifest hashes every file
    for f in m["files"]:
        assert output.sha256_file(tmp_path / fmt / f["path"]) == f["sha256"]
    assert not (tmp_path / (fmt + output.PARTIAL)).exists()


def test_round_trip_detects_a_changed_sample(reasoning_dir, tmp_path):
    out = tmp_path / "lf"
    convert(reasoning_dir, "llamafactory", out)
    path = out / "train.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["messages"][2]["content"] = row["messages"][2]["content"].replace("\n</answer>", " \n</answer>")
    path.write_text("\n".join([json.dumps(row)] + lines[1:]) + "\n")
    problems = round_trip(reasoning_dir, out)
    assert len(problems) == 1 and problems[0].startswith(row["id"] + ": answer")


def test_rl_formats_express_every_action_and_carry_the_reward(reasoning_dir, tmp_path):
    """Swipes and long presses are written (direction and end point, duration), and the
    output carries the reward file its README and manifest point the trainer at."""
    items = {it.key: it for it in iter_items(reasoning_dir)}
    swipes = [k for k, it in items.items() if it.action_type == "Swipe"]
    presses = [k for k, it in items.items() if it.action_type == "LongPress"]
    assert swipes and presses
    for fmt, name in (("verl", "compute_score"), ("easyr1", "compute_score_easyr1")):
        out = tmp_path / fmt
        m = convert(reasoning_dir, fmt, out)
        assert m["inexpressible_count"] == 0 and m["samples"] == len(items)
        assert m["reward_function"] == {"path": "reward.py", "readme": "README.md", "name": name}
        assert (out / "reward.py").read_bytes() == (ROOT / "synthesis" / "gui_reward.py").read_bytes()
        assert (
            f"reward.py:{name}" in (out / "README.md").read_text() or name in (out / "README.md").read_text()
        )
        rows = {}
        for _, row in output.parquet_rows(out):
            key = row["extra_info"]["key"] if fmt == "verl" else row["key"]
            rows[key] = json.loads(row["reward_model"]["ground_truth"] if fmt == "verl" else row["answer"])
        for k in swipes:
            act = items[k].meta["action"]
            assert rows[k]["direction"] in ("up", "down", "left", "right"), k
            assert rows[k]["end"] == [act["x2"], act["y2"]] and rows[k]["point_norm"] == [act["x"], act["y"]]
        for k in presses:
            assert rows[k]["action_type"] == "LongPress" and rows[k]["point"] is not None


def test_a_killed_run_leaves_nothing_complete_and_a_rerun_restarts(reasoning_dir, tmp_path, monkeypatch):
    out = tmp_path / "out"
    first = convert(reasoning_dir, "hf-parquet", out)
    from trajforge.convert import hf_parquet

    real = hf_parquet.Writer.write
    calls = {"n": 0}

    def dies(self, item):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt  # a kill part-way
        real(self, item)

    monkeypatch.setattr(hf_parquet.Writer, "write", dies)
    with pytest.raises(KeyboardInterrupt):
        convert(reasoning_dir, "hf-parquet", out)
    partial = tmp_path / ("out" + output.PARTIAL)
    assert partial.is_dir() and not (partial / MANIFEST).exists()
    # the earlier complete output is untouched
    assert json.loads((out / MANIFEST).read_text())["files"] == first["files"]
    monkeypatch.setattr(hf_parquet.Writer, "write", real)
    again = convert(reasoning_dir, "hf-parquet", out)
    assert not partial.exists() and again["files"] == first["files"]


def test_cli_converts_and_errors_name_the_path(reasoning_dir, tmp_path):
    r = CliRunner().invoke(
        app, ["convert", str(reasoning_dir), "--to", "swift", "--out", str(tmp_path / "sw")]
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "sw" / MANIFEST).is_file()
    r = CliRunner().invoke(
        app, ["convert", str(reasoning_dir), "--to", "axolotl", "--out", str(tmp_path / "x")]
    )
    assert r.exit_code == 2 and "unknown format 'axolotl'" in r.output
    r = CliRunner().invoke(app, ["convert", str(tmp_path), "--to", "swift", "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and str(tmp_path) in r.output and "not a set" in r.output
    r = CliRunner().invoke(
        app,
        [
            "convert",
            str(reasoning_dir),
            "--to",
            "swift",
            "--profile",
            "qwen3-vl",
            "--out",
            str(tmp_path / "z"),
        ],
    )
    assert r.exit_code == 2 and "qwen2.5-vl" in r.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "z").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    r = CliRunner().invoke(
        app, ["convert", str(reasoning_dir), "--to", "swift", "--out", str(tmp_path / "mine")]
    )
    assert r.exit_code == 2 and "is not a conversion output" in r.output
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_hf_parquet_fixed_columns_features_and_card(reasoning_dir, grounding_dir, tmp_path):
    import datasets
    import pyarrow.parquet as pq
    import yaml

    from trajforge.convert.hf_parquet import features

    for set_dir in (reasoning_dir, grounding_dir):
        out = tmp_path / read_manifest(set_dir)["kind"]
        m = convert(set_dir, "hf-parquet", out)
        files = {s: str(out / p) for s, p in m["data_files"].items()}
        schemas = {str(pq.read_schema(f).remove_metadata()) for f in files.values()}
        assert len(schemas) == 1  # the same columns in every file
        ds = datasets.load_dataset("parquet", data_files=files)
        assert set(ds) == set(m["per_split"])
        for split, d in ds.items():
            assert d.features == features() and len(d) == m["per_split"][split]
            assert d[0]["image"].size == (d[0]["image_width"], d[0]["image_height"])
        text = (out / "README.md").read_text()
        header = yaml.safe_load(text.split("---")[1])
        [config] = header["configs"]
        assert {f["split"] for f in config["data_files"]} == set(m["per_split"])
        assert all((out / f["path"]).is_file() for f in config["data_files"])
        assert header["license"] and "## Provenance" in text and "## Personal data" in text
        counts = json.loads(text.split("```json")[1].split("```")[0])
        assert counts["languages"] and (("dedup_rate" in counts) == (set_dir == grounding_dir))
        assert {s["name"]: s["num_examples"] for s in header["dataset_info"]["splits"]} == m["per_split"]


def test_llamafactory_and_swift_follow_their_documented_schema(reasoning_dir, grounding_dir, tmp_path):
    """LLaMA-Factory data/README (sharegpt + OpenAI tags, `<image>` count = len(images),
    paths relative to the dataset dir); ms-swift custom dataset docs (messages, images,
    objects {ref, bbox} for grounding, `<ref-object>`/`<bbox>` not needed with one ref)."""
    lf = convert(reasoning_dir, "llamafactory", tmp_path / "lf")
    info = json.loads((tmp_path / "lf" / "dataset_info.json").read_text())
    assert sorted(info) == lf["datasets"]
    for entry in info.values():
        assert entry["formatting"] == "sharegpt" and entry["columns"]["images"] == "images"
        for line in (tmp_path / "lf" / entry["file_name"]).read_text().splitlines():
            row = json.loads(line)
            roles = [m["role"] for m in row["messages"]]
            assert roles == ["system", "user", "assistant"]
            assert sum(m["content"].count("<image>") for m in row["messages"]) == len(row["images"]) == 1
            assert (tmp_path / "lf" / row["images"][0]).is_file()
    convert(grounding_dir, "swift", tmp_path / "sw")
    rows = [json.loads(x) for p in (tmp_path / "sw").glob("*.jsonl") for x in p.read_text().splitlines()]
    assert rows and all(len(r["objects"]["ref"]) == len(r["objects"]["bbox"]) == 1 for r in rows)
    # "norm1" (0-1 of the screenshot): one of the two types ms-swift knows ("real", "norm1")
    assert all(r["objects"]["bbox_type"] == "norm1" for r in rows)
    assert all(0 <= c <= 1 for r in rows for c in r["objects"]["bbox"][0])


def test_verl_and_easyr1_columns(reasoning_dir, tmp_path):
    """verl's RLHFDataset reads prompt (chat list), images, reward_model.ground_truth,
    data_source, extra_info; EasyR1 prompt / answer / images."""
    import pyarrow.parquet as pq

    convert(reasoning_dir, "verl", tmp_path / "v")
    t = pq.read_table(next((tmp_path / "v").glob("train.parquet")))
    assert {"data_source", "prompt", "images", "reward_model", "extra_info"} <= set(t.column_names)
    row = t.slice(0, 1).to_pylist()[0]
    gt = json.loads(row["reward_model"]["ground_truth"])
    assert row["reward_model"]["style"] == "rule" and "action_type" in gt
    assert row["prompt"][1]["content"].count("<image>") == len(row["images"]) == 1
    convert(reasoning_dir, "easyr1", tmp_path / "e")
    t = pq.read_table(next((tmp_path / "e").glob("train.parquet")))
    assert {"prompt", "answer", "images"} <= set(t.column_names)


TOKEN_WEIGHTS = {  # format -> (carried, a word its reason must give)
    "trl": (True, "training.engines.trl_sft"),
    "swift": (True, "--loss_scale trajforge"),
    "llamafactory": (False, "masks whole turns"),
    "verl": (False, "not applicable"),
    "easyr1": (False, "not applicable"),
    "hf-parquet": (True, "spans"),
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_manifest_says_whether_token_weights_are_carried(fmt, reasoning_dir, tmp_path):
    """Every format's convert manifest states whether the action-aware token weights reach
    its trainer and how; where they are carried, the rows hold the spans they come from."""
    assert set(TOKEN_WEIGHTS) == set(FORMATS)
    out = tmp_path / fmt
    convert(reasoning_dir, fmt, out, limit=6)
    written = json.loads((out / MANIFEST).read_text())
    carried, reason = TOKEN_WEIGHTS[fmt]
    assert written["token_weights"]["carried"] is carried and reason in written["token_weights"]["how"]
    if fmt in ("swift", "llamafactory"):
        rows = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
        with_spans = [r for r in rows if r["spans"] and json.loads(r["spans"]).get("action")]
        assert with_spans  # written either way; LLaMA-Factory does not read them
    if fmt == "hf-parquet":
        assert (
            "Token weights (reasoning 1, action 2, coordinates 4): as data" in (out / "README.md").read_text()
        )
