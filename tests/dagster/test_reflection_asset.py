"""reflection_trajectories in a real run: the sandbox, Chromium, a wrong tap really executed,
its reflection stored as the next step's thought, the sidecar, and an idempotent re-run."""

from __future__ import annotations

import dagster as dg
import pyarrow.parquet as pq
import pytest

from dagster_project.assets.catalog import task_catalog
from dagster_project.assets.reflection import COLLECTION, reflection_trajectories, spread
from dagster_project.resources import BrowserResource, SandboxResource, StorageResource
from synthesis.template_cot import recorded_reflection
from trajforge.store.raw import RawStore


def test_spread_takes_every_nth_task_by_id():
    class T:
        def __init__(self, i):
            self.task_id = f"t{i:02d}"

    tasks = [T(i) for i in range(10)][::-1]
    assert [t.task_id for t in spread(tasks, 4)] == ["t00", "t02", "t05", "t07"]
    assert len(spread(tasks, 20)) == 10


@pytest.mark.slow
def test_reflections_are_played_stored_and_not_replayed(tmp_path):
    data = tmp_path / "data"
    resources = {
        "storage": StorageResource(root=str(data)),
        "sandbox": SandboxResource(),
        "browser": BrowserResource(),
    }
    instance = dg.DagsterInstance.ephemeral()
    assets = [task_catalog, reflection_trajectories]
    assert dg.materialize(
        assets,
        selection=["task_catalog"],
        resources=resources,
        instance=instance,
        run_config={"ops": {"task_catalog": {"config": {"per_template": 1}}}},
    ).success
    cfg = {"ops": {"reflection_trajectories": {"config": {"max_tasks": 3}}}}
    first = dg.materialize(
        assets, selection=["reflection_trajectories"], resources=resources, instance=instance, run_config=cfg
    )
    assert first.success
    meta = first.asset_materializations_for_node("reflection_trajectories")[0].metadata
    written = meta["written"].value
    assert meta["tasks"].value == 3 and written + meta["skipped"].value + meta["errors"].value == 3
    assert written >= 1 and meta["errors"].value == 0

    store = RawStore(data / "raw")
    trajs = {t.trajectory_id: t for t in store.iter_trajectories(COLLECTION)}
    assert len(trajs) == written
    sidecar = pq.read_table(data / "raw" / COLLECTION / "reflection.parquet").to_pylist()
    assert sorted(r["trajectory_id"] for r in sidecar) == sorted(trajs)
    assert meta["led_to_success"].value == sum(r["led_to_success"] for r in sidecar)
    for row in sidecar:  # the step after the wrong one carries the reflection it recorded
        steps = {s.index: s for s in store.iter_steps(COLLECTION) if s.trajectory_id == row["trajectory_id"]}
        assert recorded_reflection(steps[row["wrong_step"] + 1]) == row["reflection"].strip()
        assert trajs[row["trajectory_id"]].source_name == "sandbox:reflection"

    again = dg.materialize(
        assets, selection=["reflection_trajectories"], resources=resources, instance=instance, run_config=cfg
    )
    m2 = again.asset_materializations_for_node("reflection_trajectories")[0].metadata
    assert (m2["written"].value, m2["already_stored"].value) == (0, written)
    assert len(list(store.iter_trajectories(COLLECTION))) == written
