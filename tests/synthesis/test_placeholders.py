"""No training target holds a personal-data placeholder: the count and the blocking check."""

from __future__ import annotations

from dagster_project.checks_synthesis import placeholder_result
from synthesis.cot import generate_cot
from synthesis.placeholders import count_samples, placeholder_counts
from synthesis.set_writer import write_reasoning_set
from tests.export.shard_fixtures import build_store
from trajforge.store.raw import RawStore


def _with_typed(built, root, text: str) -> RawStore:
    """The built store again, every typed text replaced by `text` (what placeholder-era
    curation shipped: "[EMAIL]" where an address was typed)."""
    store = RawStore(root)
    with store.writer("web", batch_size=4) as w:
        for tid in sorted(built.trajectories):
            steps = []
            for s in built.steps[tid]:
                if s.action.text and s.action.type.value == "type":
                    s = s.model_copy(update={"action": s.action.model_copy(update={"text": text})})
                steps.append(s)
            w.add(built.trajectories[tid], steps)
    for (tid, i), img in built.images.items():
        step = built.steps[tid][i]
        store.blobs.put(img, step.image_format)
    return store


def _set(store: RawStore, out):
    trajs = list(store.iter_trajectories())
    steps = {}
    for s in store.iter_steps():
        steps.setdefault(s.trajectory_id, []).append(s)
    cots = [
        c.to_row()
        for c in generate_cot([(t, sorted(steps[t.trajectory_id], key=lambda s: s.index)) for t in trajs])
    ]
    write_reasoning_set(store, cots, out, dataset="rs")
    return placeholder_counts(out)


def test_a_placeholder_in_a_target_fails_the_check(tmp_path):
    built = build_store(tmp_path / "built")
    clean = _set(_with_typed(built, tmp_path / "clean", "bob.lee@example.com"), tmp_path / "set_clean")
    assert clean["samples"] > 0 and clean["targets_with_placeholder"] == 0
    assert placeholder_result(clean).passed

    bad = _set(_with_typed(built, tmp_path / "bad", "[EMAIL]"), tmp_path / "set_bad")
    assert bad["targets_with_placeholder"] > 0 and bad["tokens_in_targets"]["[EMAIL]"] > 0
    result = placeholder_result(bad)
    assert not result.passed
    assert result.metadata["targets_with_placeholder"].value == bad["targets_with_placeholder"]
    assert result.metadata["examples"].value[0]["tokens"] == ["[EMAIL]"]


def test_prompts_are_counted_apart_from_targets():
    sample = {
        "mode": "direct",
        "answer": {"value": "None"},
        "conversations": [
            {"from": "system", "value": "You are a GUI agent."},
            {"from": "human", "value": "Task: Update my email to [EMAIL]."},
            {"from": "gpt", "value": '<answer>{"action_type": "Click"}</answer>'},
        ],
    }
    c = count_samples([("k", sample)])
    assert (c["targets_with_placeholder"], c["prompts_with_placeholder"]) == (0, 1)
    typed = {**sample, "answer": {"value": "[PHONE]"}}
    assert count_samples([("k", typed)])["tokens_in_targets"] == {"[PHONE]": 1}
