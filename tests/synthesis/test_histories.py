"""Histories as executed: a sample's "Previous actions" are every executed step before it.

The raw table is tests/filters/conftest.py's (a duplicate, a near duplicate, no-ops, a
loop, out-of-bounds taps, ...), curated for real: the dropped steps are no targets,
but each sample of step k lists k actions, the dropped ones among them.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from filters.pii_surrogate import surrogate
from filters.pipeline import curate
from schemas.actions import Action, ActionType
from schemas.arrow import row_to_step
from schemas.errors import SchemaError
from schemas.model_profiles import model_profile
from schemas.records import DeviceProfile, Step, Task, Trajectory
from synthesis.cot import generate_cot
from synthesis.prompts import executed_history
from synthesis.reasoning_set import human_prompt, sample_jsons
from synthesis.set_options import ReasoningSetOptions
from synthesis.set_writer import write_reasoning_set
from tests.filters.conftest import build_raw
from trajforge.publish.shards import iter_samples
from trajforge.store.raw import RawStore


def history_of(human: str) -> list[str]:
    head, sep, tail = human.partition("Previous actions:\n")
    return tail.splitlines() if sep else []


@pytest.fixture(scope="module")
def curated_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("histories")
    raw = build_raw(root)
    result = curate(raw.dir, raw.blobs, root / "curated")
    store = RawStore(root / "curated" / "store")
    steps = {}
    for s in store.iter_steps():
        steps.setdefault(s.trajectory_id, []).append(s)
    pairs = [(t, sorted(steps[t.trajectory_id], key=lambda s: s.index)) for t in store.iter_trajectories()]
    rows = [c.to_row() for c in generate_cot(pairs)]
    return raw, result, store, pairs, rows


def test_sample_k_lists_k_executed_actions_with_the_dropped_ones(curated_set, tmp_path):
    raw, result, store, pairs, rows = curated_set
    gaps = {t.trajectory_id: sorted(set(range(t.num_steps)) - {s.index for s in kept}) for t, kept in pairs}
    assert any(gaps.values()), "the fixture must curate some step out of a kept trajectory"
    out = tmp_path / "set"
    options = ReasoningSetOptions(splits=(("train", 1.0),))
    summary = write_reasoning_set(
        store, rows, out, dataset="h", options=options, recorded=raw.dir / "steps.parquet"
    )
    recorded, invalid = {}, {}
    for r in pq.read_table(raw.dir / "steps.parquet").to_pylist():
        try:
            recorded.setdefault(r["trajectory_id"], {})[r["index"]] = row_to_step(r)
        except SchemaError:  # the fixture's tap at x=1.3: no action to put into words
            invalid.setdefault(r["trajectory_id"], []).append(r["index"])
    # Only a step after a recorded row that does not validate has no faithful history.
    unknown = sum(
        1 for t, kept in pairs for s in kept if any(i < s.index for i in invalid.get(t.trajectory_id, []))
    )
    assert unknown and summary["skipped_steps"] == {"history_incomplete": unknown}
    samples = [s["json"] for _, s in iter_samples(out, "train")]
    assert len(samples) == 2 * (sum(len(kept) for _, kept in pairs) - unknown)
    after_gap = 0
    for j in samples:
        lines = history_of(j["conversations"][1]["value"])
        assert len(lines) == j["index"], (j["trajectory_id"], j["index"], lines)
        assert [line.split(":")[0] for line in lines] == [f"Step {k}" for k in range(1, j["index"] + 1)]
        gone = [g for g in gaps[j["trajectory_id"]] if g < j["index"]]
        after_gap += bool(gone)
        for g in gone:  # a dropped step's line is its recorded action
            if g in recorded[j["trajectory_id"]]:
                mine = recorded[j["trajectory_id"]]
                want = executed_history(
                    [mine[i] for i in sorted(mine)], g + 1, "en", model_profile(j["model_profile"])
                )
                assert lines[g] == want[g]
    assert after_gap > 0


def test_without_the_recording_a_step_after_a_gap_is_skipped_not_mis_told(curated_set, tmp_path):
    raw, result, store, pairs, rows = curated_set
    options = ReasoningSetOptions(splits=(("train", 1.0),))
    summary = write_reasoning_set(store, rows, tmp_path / "set", dataset="h", options=options)
    n_after = sum(
        1 for t, kept in pairs for s in kept if s.index != sum(1 for k in kept if k.index < s.index)
    )
    assert summary["skipped_steps"] == {"history_incomplete": n_after}
    for _, s in iter_samples(tmp_path / "set", "train"):
        assert len(history_of(s["json"]["conversations"][1]["value"])) == s["json"]["index"]


def test_a_blocked_step_was_not_executed_and_has_no_history_line():
    acts = [Action.tap(0.1, 0.1), Action.scroll("down"), Action.tap(0.5, 0.5), Action(type=ActionType.DONE)]
    steps = [
        Step(
            trajectory_id="tb",
            index=i,
            screenshot="ab" * 32,
            width=100,
            height=100,
            action=a,
            guard="blocked:payment: pay button" if i == 2 else None,
        )
        for i, a in enumerate(acts)
    ]
    assert executed_history(steps, 2, "en") == ["Step 1: tap at (10, 10)", "Step 2: scroll down"]
    assert executed_history(steps, 3, "en") == executed_history(steps, 2, "en")
    assert executed_history(steps, 2, "zh")[1] == "第2步：向下滚动页面"


def test_dropped_text_is_scrubbed_in_the_history():
    """Real data (an import): the dropped step's typed address becomes the surrogate that
    curation gives it in the kept steps (seeded by trajectory and value), never [EMAIL]."""
    task = Task(task_id="t", instruction="Write to bob", language="en", app="mail")
    traj = Trajectory(
        trajectory_id="tp",
        task=task,
        platform="web",
        app="mail",
        source="import",
        source_name="aitz",
        policy="oracle",
        num_steps=3,
        device=DeviceProfile(viewport_width=100, viewport_height=100),
        outcome="success",
        verified_by="state",
    )
    acts = [
        Action.type_text("alice.smith@example.com", 0.5, 0.5),
        Action.tap(0.2, 0.2),
        Action(type=ActionType.DONE),
    ]
    steps = [
        Step(trajectory_id="tp", index=i, screenshot="ab" * 32, width=100, height=100, action=a)
        for i, a in enumerate(acts)
    ]
    cots = {c.index: c for c in generate_cot([(traj, steps)])}
    out = sample_jsons(traj, steps[1:], cots, recorded=steps)
    human = out[0][2]["conversations"][1]["value"]
    typed = surrogate("email", "alice.smith@example.com", "tp")
    assert history_of(human) == [f'Step 1: type "{typed}"']
    assert "alice" not in human and "[EMAIL]" not in human
    # A sandbox trajectory's planted address is synthetic: kept as typed.
    sandbox = traj.model_copy(update={"source": "crawl", "source_name": "sandbox"})
    kept = sample_jsons(sandbox, steps[1:], cots, recorded=steps)[0][2]["conversations"][1]["value"]
    assert history_of(kept) == ['Step 1: type "alice.smith@example.com"']
    # The screenshot's size in the prompt is the frame the model sees (qwen2.5-vl: 112x112).
    assert human == human_prompt(
        "Write to bob", [f'Step 1: type "{typed}"'], *model_profile(None).frame(100, 100), "en"
    )
