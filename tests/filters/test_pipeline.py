"""curate() on the planted raw_steps table: counts per reason, scrubbing, re-decision, re-runs, judge."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq

from filters.base import decide_table
from filters.config import CurateConfig
from filters.pipeline import curate
from filters.steps import FILTER_ORDER, default_filters
from schemas.arrow import TRAJECTORY_SCHEMA, trajectory_to_row
from tests.filters.conftest import EMAIL, KEPT, PHONE, PLANTED
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMRequest


def table(curated, name="steps.parquet"):
    return pq.read_table(curated.out_dir / name)


def by_key(curated):
    return {(r["trajectory_id"], r["index"]): r for r in table(curated).to_pylist()}


def test_reconciles_and_counts_each_planted_reason(raw, curated):
    s = json.loads((curated.out_dir / "summary.json").read_text())
    assert s["dropped"] == PLANTED and s["filter_order"] == FILTER_ORDER == list(PLANTED)
    assert s["steps_in"] == len(raw.rows) == 32 and s["steps_kept"] == KEPT
    assert s["steps_in"] == s["steps_kept"] + sum(s["dropped"].values())
    assert (s["trajectories_in"], s["trajectories_kept"]) == (8, 6)
    assert s["trajectories_dropped"] == {"task_failed": 1, "trajectory_length": 1}
    t = table(curated)
    assert t.num_rows == 32 and t.column("row").to_pylist() == list(range(32))
    # Every drop has a reason; every kept row has none.
    assert all((r is None) == k for k, r in zip(t.column("keep").to_pylist(), t.column("reason").to_pylist()))
    assert s["neardup_histogram"]["0"] == 2 and sum(s["neardup_histogram"].values()) == 32
    assert len(s["neardup_histogram"]) >= s["near_duplicate_max_distance"] + 2


def test_each_stage_counts_what_it_did(curated):
    c = curated.counts
    assert list(c) == ["read", "judge", "score", "decide", "scrub", "write"]
    assert c["read"] == {"trajectories": 8, "screens_decoded": curated.summary["screens_decoded"]}
    assert c["judge"] == {"judged": 0, "parsed": 0}
    assert c["score"] == {"steps": 32, "trajectories": 8}
    assert c["decide"] == {
        "steps_kept": KEPT,
        "steps_dropped": PLANTED,
        "trajectories_kept": 6,
        "trajectories_dropped": {"task_failed": 1, "trajectory_length": 1},
    }
    assert c["scrub"] == {
        "steps_with_pii": 1,
        "replaced": {},
        "synthetic_kept": {"email": 2, "phone": 1},
        "trajectories": {"synthetic_kept": 6},
        "ocr_screens": 0,
    }
    # Every input row in the table, the kept ones in the store, each value found listed.
    assert c["write"] == {"step_rows": 32, "trajectories": 6, "steps": KEPT, "audit_lines": 3}
    assert len((curated.out_dir / "pii_audit.jsonl").read_text().splitlines()) == 3


def test_verdicts_point_at_the_right_rows(curated):
    rows = by_key(curated)
    # t00 (failed, earlier in order) is not a reference: t01's home step is kept,
    # and t02's copy of it is a duplicate of t01's row, not of t00's.
    assert rows[("t01_good", 0)]["keep"] and rows[("t01_good", 0)]["dup_of"] is None
    assert rows[("t02_dups", 0)]["dup_of"] == rows[("t01_good", 0)]["row"]
    assert rows[("t02_dups", 0)]["dup_screen_count"] == 2
    assert rows[("t02_dups", 1)]["neardup_of"] == rows[("t01_good", 2)]["row"]
    assert rows[("t02_dups", 2)]["keep"]  # same screen, another action
    assert rows[("t03_noop", 0)]["reason"] == "no_op" and rows[("t03_noop", 0)]["next_phash_distance"] == 0
    assert rows[("t03_noop", 1)]["screen_changed_recorded"] is False
    assert rows[("t04_loop", 4)]["loop_visits"] == 3
    assert rows[("t05_bounds", 0)]["oob_excess"] > 0.29 and rows[("t05_bounds", 0)]["step_error"]
    assert [rows[("t06_images", i)]["screenshot_status"] for i in range(5)] == [
        "ok",
        "missing",
        "broken",
        "empty",
        "ok",
    ]


def test_kept_steps_go_to_the_curated_store_synthetic_values_kept_and_listed(raw, curated):
    """The planted table is a sandbox crawl: its values are synthetic, kept as they are."""
    rows = by_key(curated)
    pii_row = rows[("t01_good", 1)]
    assert pii_row["pii_kinds"] == ["email"] and pii_row["pii_count"] >= 1
    original = hashlib.sha256(raw.images[("t01_good", 1)]).hexdigest()
    assert pii_row["screenshot_out"] == original  # synthetic: not blurred
    store = RawStore(curated.out_dir / "store")
    assert store.collections() == ["curated"]
    steps = {(s.trajectory_id, s.index): s for s in store.iter_steps()}
    assert set(steps) == {k for k, r in rows.items() if r["keep"]}
    assert EMAIL in steps[("t01_good", 1)].a11y_tree and "[EMAIL]" not in steps[("t01_good", 1)].a11y_tree
    for s in steps.values():
        assert store.blobs.exists(s.screenshot, s.image_format)
    trajs = {t.trajectory_id: t for t in store.iter_trajectories()}
    assert trajs["t01_good"].task.instruction == f"Call {PHONE} about the order"
    assert trajs["t04_loop"].num_steps == 6 and sorted(i for t, i in steps if t == "t04_loop") == [
        0,
        1,
        2,
        3,
        5,
    ]
    assert curated.summary["pii"] == {} and curated.summary["pii_synthetic_kept"] == {"email": 2, "phone": 1}
    assert curated.summary["pii_synthetic_sources"] == ["sandbox"]
    tt = {r["trajectory_id"]: r for r in table(curated, "trajectories.parquet").to_pylist()}
    assert tt["t01_good"]["pii_task_kinds"] == ["phone"] and tt["t00_failed"]["reason"] == "task_failed"
    assert tt["t01_good"]["pii_policy"] == "synthetic_kept" and tt["t00_failed"]["pii_policy"] is None
    # Listed for the audit, without the values.
    audit = [json.loads(line) for line in (curated.out_dir / "pii_audit.jsonl").read_text().splitlines()]
    assert {(a["trajectory_id"], a["index"], a["kind"], a["action"]) for a in audit} == {
        ("t01_good", 1, "email", "kept_synthetic"),
        ("t01_good", None, "phone", "kept_synthetic"),
    }
    assert EMAIL not in json.dumps(audit) and PHONE not in json.dumps(audit)


def test_real_data_gets_surrogates_in_every_field_and_a_blur(raw, tmp_path):
    """The same table declared real (no synthetic source): values replaced, boxes blurred."""
    from filters.pii import find_pii

    real = curate(
        raw.dir, raw.blobs, tmp_path / "cur", config=CurateConfig(synthetic_sources=(), ocr="never")
    )
    rows = by_key(real)
    pii_row = rows[("t01_good", 1)]
    assert pii_row["pii_kinds"] == ["email"]
    assert pii_row["screenshot_out"] != hashlib.sha256(raw.images[("t01_good", 1)]).hexdigest()
    store = RawStore(real.out_dir / "store")
    steps = {(s.trajectory_id, s.index): s for s in store.iter_steps()}
    assert store.blobs.get(pii_row["screenshot_out"]) != raw.images[("t01_good", 1)]
    tree = steps[("t01_good", 1)].a11y_tree
    assert EMAIL not in tree and "[EMAIL]" not in tree
    [m] = find_pii(tree)
    assert m.kind == "email" and m.text.endswith(("@example.com", "@example.net", "@example.org"))
    assert steps[("t01_good", 1)].elements[0].name == f"Email {m.text}"  # tree and element agree
    trajs = {t.trajectory_id: t for t in store.iter_trajectories()}
    instruction = trajs["t01_good"].task.instruction
    assert PHONE not in instruction and "[PHONE]" not in instruction
    [p] = find_pii(instruction)
    assert p.kind == "phone" and len(p.text) == len(PHONE) and p.text[:3] == PHONE[:3]
    assert real.summary["pii"] == {"email": 2, "phone": 1} and real.summary["pii_synthetic_kept"] == {}
    tt = {r["trajectory_id"]: r for r in table(real, "trajectories.parquet").to_pylist()}
    assert tt["t01_good"]["pii_policy"] == "surrogate"
    # A re-run gives the same bytes: the surrogates are seeded by trajectory and value.
    again = curate(
        raw.dir, raw.blobs, tmp_path / "cur2", config=CurateConfig(synthetic_sources=(), ocr="never")
    )
    steps2 = {(s.trajectory_id, s.index): s for s in RawStore(again.out_dir / "store").iter_steps()}
    assert steps2[("t01_good", 1)].a11y_tree == tree
    assert (again.out_dir / "pii_audit.jsonl").read_bytes() == (real.out_dir / "pii_audit.jsonl").read_bytes()


def test_thresholds_move_on_the_stored_table(curated):
    t = table(curated)
    keep, reasons = decide_table(t, default_filters(CurateConfig()))
    assert keep == t.column("keep").to_pylist() and reasons == t.column("reason").to_pylist()
    moved = decide_table(t, default_filters(CurateConfig(loop_k=4, min_steps=2, drop_failed=False)))[1]
    was = t.column("reason").to_pylist()
    changed = {i for i, (a, b) in enumerate(zip(was, moved)) if a != b}
    ids = t.column("trajectory_id").to_pylist()
    # The loop step comes back; the short and failed runs are re-decided step by step.
    assert {ids[i] for i in changed} == {"t04_loop", "t07_short", "t00_failed"}
    assert moved[was.index("loop")] is None


def test_rerun_gives_same_tables_and_replaces_the_store(raw, curated):
    before = {
        n: (curated.out_dir / n).read_bytes()
        for n in ("steps.parquet", "trajectories.parquet", "summary.json")
    }
    again = curate(raw.dir, raw.blobs, curated.out_dir)
    for n, data in before.items():
        assert (curated.out_dir / n).read_bytes() == data, n
    store = RawStore(curated.out_dir / "store")
    ids = [t.trajectory_id for t in store.iter_trajectories()]
    assert len(ids) == len(set(ids)) == again.trajectories_kept == 6
    assert not [p for p in curated.out_dir.iterdir() if p.name.startswith(".")]


class ScriptedBackend:
    """Stands in for a VLM: answers each trajectory (the request key) from a script."""

    model_id = "scripted-judge"

    def __init__(self, answers: dict[str, str]):
        self.answers, self.seen = answers, []

    def generate(self, requests: list[VLMRequest], max_new_tokens: int) -> list[str]:
        self.seen += [r.key for r in requests]
        return [self.answers.get(r.key, '{"success": true, "irrelevant_steps": []}') for r in requests]


def test_judge_decides_unverified_runs_and_is_measured_on_verified(raw, tmp_path):
    from filters.judge import Judge

    rows = []
    for t in raw.trajectories.values():
        row = trajectory_to_row(t)
        if t.trajectory_id in ("t04_loop", "t05_bounds"):
            row.update(outcome="unknown", verified_by="none")
        rows.append(row)
    d = tmp_path / "raw_steps"
    d.mkdir()
    (d / "steps.parquet").write_bytes((raw.dir / "steps.parquet").read_bytes())
    pq.write_table(pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), d / "trajectories.parquet")
    backend = ScriptedBackend(
        {
            "t00_failed": '{"success": false, "irrelevant_steps": []}',
            "t03_noop": '{"success": false, "irrelevant_steps": [2]}',  # wrong, and trusted: advice only
            "t04_loop": '{"success": true, "irrelevant_steps": [1]}',
            "t05_bounds": '{"success": false, "irrelevant_steps": []}',
        }
    )
    res = curate(d, raw.blobs, tmp_path / "out", judge=Judge(backend))
    assert "t07_short" not in backend.seen  # too short: never judged
    assert res.dropped["judge_failure"] == 4 and res.dropped["judge_irrelevant"] == 1
    assert res.steps_in == res.steps_kept + sum(res.dropped.values())
    agreement = res.summary["judge"]["agreement"]
    # t00 (failure, judged failure), t01, t02, t06 agree; t03 does not.
    assert (agreement["n"], agreement["agree"]) == (5, 4)
    steps = {(r["trajectory_id"], r["index"]): r for r in table(res).to_pylist()}
    assert steps[("t03_noop", 2)]["keep"] and steps[("t04_loop", 1)]["reason"] == "judge_irrelevant"
    assert steps[("t05_bounds", 2)]["judge_model"] == "scripted-judge"
