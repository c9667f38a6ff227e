"""The reasoning set and the Chinese GUI set as shards: split by trajectory, images as stored,
byte-reproducible, counted skips, and `trajforge stats` on them."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from schemas.resolution import resize_image
from synthesis.cot import generate_cot
from synthesis.language import is_chinese
from synthesis.set_options import ReasoningSetOptions
from synthesis.set_writer import write_chinese_gui_set, write_reasoning_set
from tests.export.shard_fixtures import build_store
from trajforge.cli import app
from trajforge.publish.holdout import HoldOut
from trajforge.publish.plan import check_splits
from trajforge.publish.shards import iter_samples, verify

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("curated"))


@pytest.fixture(scope="module")
def cot_rows(built):
    """The template CoT of every step, as rows of the CoT table (answer as JSON text)."""
    return [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]


@pytest.fixture(scope="module")
def written(built, cot_rows, tmp_path_factory):
    out = tmp_path_factory.mktemp("sets") / "reasoning"
    options = ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=10)
    summary = write_reasoning_set(built.store, cot_rows, out, dataset="reasoning", options=options)
    return out, summary


def assert_checks_pass_but_alignment_not_run(checks: dict) -> None:
    """Template thoughts: every check passes except the alignment check, which did not run
    and says so as a warning (not a pass)."""
    assert all(c["passed"] for name, c in checks.items() if name != "alignment_rate"), checks
    align = checks["alignment_rate"]
    assert (align["passed"], align["severity"], align["not_run"]) == (False, "warn", True), align
    assert align["detail"].startswith("not run") and "template 100%" in align["detail"]


def kept(built) -> dict[str, list]:
    """The fixture's trajectories of 3-50 steps (2-step ones are skipped)."""
    return {t: built.steps[t] for t, traj in built.trajectories.items() if 3 <= traj.num_steps <= 50}


def test_shards_hold_both_modes_of_every_step_split_by_trajectory(built, written):
    out, summary = written
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "reasoning_set" and verify(out) == []
    # the manifest states each thought backend's share of the samples
    assert manifest["summary"]["thought_backend_share"] == {"template": 1.0}
    want = kept(built)
    n_steps = sum(len(s) for s in want.values())
    assert summary["skipped_trajectories"] == {"too_short": len(built.trajectories) - len(want)}
    assert summary["skipped_steps"] == {}
    assert (summary["samples"], summary["steps"]) == (2 * n_steps, n_steps)
    assert_checks_pass_but_alignment_not_run(summary["checks"])
    splits, seen = check_splits(SPLITS), Counter()
    plan = HoldOut(splits, "v1").plan(t.task for t in built.trajectories.values())
    for split in manifest["splits"]:
        for key, sample in iter_samples(out, split):
            j = sample["json"]
            tid, i = j["trajectory_id"], j["index"]
            seen[(tid, i, j["mode"])] += 1
            assert plan.split(built.trajectories[tid].task) == split  # by template
            ext = "jpg" if j["image"]["format"] == "jpeg" else "png"
            # the stored bytes at the model profile's frame (as they are at that size)
            assert sample[ext] == resize_image(
                built.images[(tid, i)], j["image"]["format"], (j["image"]["width"], j["image"]["height"])
            )
            assert key.endswith(f"_s{i:04d}_{j['mode']}")
    assert seen == Counter(
        {(t, s.index, m): 1 for t, ss in want.items() for s in ss for m in ("direct", "reason")}
    )
    assert any(k[0] == "aitw/ep.7-中" for k in seen)  # an id with a dot and a slash is kept


def test_two_runs_give_identical_bytes(built, cot_rows, written, tmp_path):
    out, _ = written
    again = tmp_path / "again"
    write_reasoning_set(
        built.store,
        list(reversed(cot_rows)),
        again,
        dataset="reasoning",
        options=ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=10),
    )
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (out / name).read_bytes() == (again / name).read_bytes(), name


def test_chinese_set_keeps_zh_tasks_with_chinese_thoughts(built, cot_rows, tmp_path):
    zh = {t for t in kept(built) if built.trajectories[t].task.language == "zh"}
    victim = min(zh)  # one step's thought in English: dropped and counted
    rows = [
        dict(r, observation="The page shows a button", reflection="It worked", plan="Tap the button now")
        if (r["trajectory_id"], r["index"]) == (victim, 0)
        else r
        for r in cot_rows
    ]
    summary = write_chinese_gui_set(
        built.store, rows, tmp_path / "zh", options=ReasoningSetOptions(splits=SPLITS)
    )
    assert summary["skipped_steps"] == {"thought_not_chinese": 1}
    assert summary["skipped_trajectories"]["other_language"] == sum(
        t.task.language == "en" for t in built.trajectories.values()
    )
    n_steps = sum(len(kept(built)[t]) for t in zh) - 1
    assert summary["samples"] == 2 * n_steps
    assert_checks_pass_but_alignment_not_run(summary["checks"])
    for _key, sample in iter_samples(tmp_path / "zh", images=False):
        j = sample["json"]
        assert j["language"] == "zh" and j["trajectory_id"] in zh
        assert j["conversations"][1]["value"].startswith("<image>\n任务：")
        if j["mode"] == "reason":
            assert is_chinese(j["conversations"][2]["value"].split("</think>")[0])


def test_stats_cli_shows_the_mix_and_the_languages(built, cot_rows, written):
    out, _ = written
    result = CliRunner().invoke(app, ["stats", str(out), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    want = kept(built)
    steps = [s for ss in want.values() for s in ss]
    assert stats["modes"] == {"direct": len(steps), "reason": len(steps)}
    assert stats["languages"] == dict(
        Counter(built.trajectories[s.trajectory_id].task.language for s in steps for _ in range(2))
    )
    assert stats["action_types"] == dict(Counter(s.action.type.value for s in steps))
    rows = {(r["trajectory_id"], r["index"]): r for r in cot_rows}
    labels = {"en": ("Observation: ", "Reflection: ", "Plan: "), "zh": ("观察：", "反思：", "计划：")}
    lengths = []
    for s in steps:
        r = rows[(s.trajectory_id, s.index)]
        o, f, p = labels[r["language"]]
        lengths.append(len(f"{o}{r['observation']}\n{f}{r['reflection']}\n{p}{r['plan']}"))
    assert (stats["thought_chars"]["n"], stats["thought_chars"]["max"], stats["thought_chars"]["min"]) == (
        len(steps),
        max(lengths),
        min(lengths),
    )
    assert stats["answers"]["match_recording"] == stats["samples"] == 2 * len(steps)
    table = CliRunner().invoke(app, ["stats", str(out)])
    assert table.exit_code == 0 and "direct" in table.stdout and "reason" in table.stdout
