"""Reflection augmentation: a real wrong step in real Chromium on the real sandbox, its
reflection and correction, verified from the app's state; wrong-control choice and skips."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from crawlers.guard import SafetyGuard
from sandbox.apps import APPS
from sandbox.episode import fetch_state
from sandbox.reflection import (
    SOURCE_NAME,
    ReflectionPolicy,
    Reflections,
    reflect_tasks,
    sidecar_paths,
    write_sidecar,
    wrong_candidates,
)
from sandbox.tasks import TEMPLATES
from sandbox.tasks.settings import SWITCH_LABELS
from schemas.a11y import elements_from_snapshot
from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.screen_signature import screen_signature
from synthesis.reflection_text import reflection
from trajforge.store.raw import RawStore


def observation(tree: str, url: str = "http://127.0.0.1:1/settings/") -> Observation:
    return Observation(
        screenshot=b"",
        image_format="png",
        width=1280,
        height=800,
        url=url,
        a11y_tree=tree,
        elements=elements_from_snapshot(tree, 1280, 800),
    )


HOME = """- banner [box=0,0,1280,60]
- link "Notifications Message previews, sound, vibration" [box=300,500,600,70]
- link "Display Dark mode, font size" [box=300,580,600,70]
- link "About phone" [box=300,660,600,70]
- link "Pay now" [box=300,420,600,70]
- link "Delete note" [box=300,340,600,70]
- link "Privacy" [disabled] [box=300,260,600,70]
- link "Storage" [box=300,900,600,70]
- button "Help" [box=950,510,80,40]
"""


def test_wrong_candidates_are_visible_enabled_unguarded_neighbours():
    obs = observation(HOME)
    intended = obs.find("Notifications", "link")[0]
    names = [e.name for e in wrong_candidates(obs, intended, SafetyGuard())]
    # Same role, nearest first; the guarded, irreversible, disabled and off-screen ones never.
    assert names == ["Display Dark mode, font size", "About phone"]
    # No other control of that role: a clickable one near it, never a far one.
    obs = observation(
        '- link "Notifications" [box=300,500,600,70]\n'
        '- button "Help" [box=950,510,80,40]\n'
        '- button "Far away" [box=10,10,40,20]\n'
    )
    assert [e.name for e in wrong_candidates(obs, obs.find("Notifications")[0])] == ["Help"]


def test_no_alternative_is_reported_and_the_oracle_goes_on():
    task = TEMPLATES["settings.notification"].make_task("en", 0)
    policy = ReflectionPolicy(
        TEMPLATES["settings.notification"], task, wrong_at=0, seed=0, write_reflection=reflection
    )
    only = observation('- link "Notifications Message previews, sound, vibration" [box=300,500,600,70]\n')
    action = policy.act(only)
    assert action.type == ActionType.TAP and policy.last_target.name.startswith("Notifications")
    assert policy.wrong_step is None and policy.reflection_text is None
    assert "no visible, enabled, unguarded control" in policy.skip_reason


# -- real Chromium, real sandbox -------------------------------------------------------
def stored(store: RawStore, tid: str):
    traj = next(t for t in store.iter_trajectories() if t.trajectory_id == tid)
    steps = sorted((s for s in store.iter_steps() if s.trajectory_id == tid), key=lambda s: s.index)
    return traj, steps


@pytest.mark.slow
def test_reflection_runs_a_real_wrong_step_and_recovers(sandbox, env, tmp_path):
    store = RawStore(tmp_path / "raw")
    en = TEMPLATES["settings.notification"].make_task("en", 0)  # home -> Notifications -> switch
    zh = TEMPLATES["settings.privacy"].make_task("zh", 0)  # 首页 -> 隐私 -> 开关
    how = dict(server_url=sandbox.url, seed=0, devices=["desktop"])
    run = dict(store=store, env=env)

    # EN: the wrong tap at step 0 opens another settings page; back; the oracle goes on.
    r = reflect_tasks([en], reflection, Reflections(wrong_at=0, **how), **run)
    assert (r.trajectories, r.success, r.skipped, r.errors) == (1, 1, [], [])
    row = r.rows[0]
    traj, steps = stored(store, row["trajectory_id"])
    assert (traj.outcome, traj.verified_by, traj.source_name, traj.policy) == (
        "success",
        "state",
        SOURCE_NAME,
        "oracle",
    )
    assert (row["wrong_step"], row["correction"], row["correction_steps"]) == (0, "back", [1])
    assert row["led_to_success"] is True and row["recovered"] is True
    wrong, reflect, retry, on_path = steps[0], steps[1], steps[2], steps[3]
    intended = json.loads(row["intended_target"])
    assert wrong.target.role == intended["role"] == "link"
    assert wrong.target.name != intended["name"]
    # The wrong tap really ran: the next screen is neither the start nor where the oracle goes.
    assert reflect.url != wrong.url and reflect.url != on_path.url
    assert screen_signature(reflect.a11y_tree) != screen_signature(on_path.a11y_tree)
    assert on_path.url.endswith("/settings/notifications")
    assert reflect.thought.startswith("<reflection>") and reflect.thought.endswith("</reflection>")
    path = reflect.url.split(sandbox.url.rstrip("/"))[1]
    assert path in reflect.thought and intended["name"] in reflect.thought
    assert reflect.thought == f"<reflection>{row['reflection']}</reflection>"
    assert reflect.action.type == ActionType.BACK and retry.url == wrong.url
    assert retry.target.name == intended["name"]
    assert [s.thought for s in steps if s.index != 1] == [None] * (len(steps) - 1)

    # ZH: the wrong tap at step 1 flips another switch in place; it is flipped back.
    r = reflect_tasks([zh], reflection, Reflections(wrong_at=1, **how), **run)
    assert (r.trajectories, r.success, r.skipped, r.errors) == (1, 1, [], [])
    row = r.rows[0]
    traj, steps = stored(store, row["trajectory_id"])
    assert traj.outcome == "success" and traj.task.language == "zh"
    assert (row["wrong_step"], row["correction"], row["correction_steps"]) == (1, "undo", [2])
    wrong, reflect, undo = steps[1], steps[2], steps[3]
    assert wrong.target.role == "switch" and wrong.target.name != json.loads(row["intended_target"])["name"]
    assert reflect.a11y_tree != wrong.a11y_tree  # the switch really flipped
    assert "<reflection>" in reflect.thought and "恢复原状" in reflect.thought
    assert wrong.target.name in reflect.thought and "/settings/privacy" in reflect.thought
    assert reflect.action.type == ActionType.TAP and reflect.target.name == wrong.target.name
    # The app's state: the task's switch set, the wrongly flipped one back where it was.
    key = next(k for k, v in SWITCH_LABELS["zh"].items() if v == wrong.target.name)
    section, name = key.split(".")
    state = fetch_state(sandbox.url, traj.trajectory_id)["state"]
    assert state[section][name] == APPS["settings"].initial_state("zh", 0)[section][name]
    assert undo.index == 3 and row["led_to_success"] is True

    # The sidecar lists both; a re-run plays nothing and rewrites the same bytes.
    _, parquet = sidecar_paths(store, "reflection/sandbox")
    table = pq.read_table(parquet).to_pylist()
    assert sorted(t["task_id"] for t in table) == [en.task_id, zh.task_id]
    before = parquet.read_bytes()
    again = reflect_tasks([en, zh], reflection, Reflections(wrong_at=0, **how), **run)
    assert (again.existing, again.trajectories) == (2, 0)
    assert parquet.read_bytes() == before
    # A row left by a crash before its commit is not listed.
    jsonl, _ = sidecar_paths(store, "reflection/sandbox")
    with open(jsonl, "a", encoding="utf-8") as f:
        f.write(json.dumps({**table[0], "trajectory_id": "never-committed"}) + "\n")
    assert pq.read_table(write_sidecar(store, "reflection/sandbox")).num_rows == 2


@pytest.mark.slow
def test_no_wrong_action_is_counted_and_nothing_is_stored(sandbox, env, tmp_path):
    # A guard that allows only the oracle's first target: no alternative to tap there.
    guard = SafetyGuard(patterns={"test": [r"^(?!Notifications)"]})
    store = RawStore(tmp_path / "raw")
    task = TEMPLATES["settings.notification"].make_task("en", 0)
    r = reflect_tasks(
        [task],
        reflection,
        Reflections(server_url=sandbox.url, wrong_at=0, devices=["desktop"], guard=guard),
        store=store,
        env=env,
    )
    assert r.trajectories == 0 and r.errors == [] and len(r.skipped) == 1
    task_id, why = r.skipped[0]
    assert task_id == task.task_id and why.startswith("step 0: no visible")
    assert store.committed_ids() == set()
    assert pq.read_table(r.sidecar).num_rows == 0
