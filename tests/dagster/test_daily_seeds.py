"""Daily runs add data: two ticks of the crawl schedule draw different seeds, so tick 2's
tasks are new and the crawl's resume (keyed by task id, policy and seed) skips none of them."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from dagster_project.assets.crawl import CrawlConfig, catalog_tasks
from dagster_project.schedules import daily_mobile_crawl, daily_web_crawl
from sandbox.environment import SOURCE_NAME
from sandbox.tasks import build_catalog
from schemas.actions import Action, ActionType
from schemas.records import DeviceProfile, Step, Trajectory, trajectory_id_for
from trajforge.tasks.catalog import write_catalog
from trajforge.tasks.seeds import EVAL_SEED_BASE


class _Storage:  # what catalog_tasks reads of StorageResource
    def __init__(self, path):
        self.catalog_path = path


def tick(schedule, day: dt.datetime) -> list[dg.RunRequest]:
    ctx = dg.build_schedule_context(scheduled_execution_time=day)
    return list(schedule(ctx))


def test_two_ticks_crawl_new_tasks_and_resume_skips_none(tmp_path):
    from trajforge.store.raw import RawStore

    catalog = tmp_path / "catalog.parquet"
    write_catalog(build_catalog(2, ("en", "zh"), 0, apps=["mail"]), catalog)
    storage = _Storage(catalog)
    store = RawStore(tmp_path / "raw")
    days = [dt.datetime(2026, 3, 1, 2, 0, tzinfo=dt.UTC), dt.datetime(2026, 3, 2, 2, 0, tzinfo=dt.UTC)]
    new_per_tick = []
    seen_tasks: set[str] = set()
    for day in days:
        req = next(r for r in tick(daily_web_crawl, day) if r.partition_key == "mail")
        config = CrawlConfig(**req.run_config["ops"]["web_trajectories"]["config"])
        assert 0 <= config.task_seed < EVAL_SEED_BASE
        tasks = catalog_tasks(storage, "mail", config)
        # What the crawl's resume would skip: trajectories already committed under these ids.
        tids = [trajectory_id_for(SOURCE_NAME, t.task_id, config.policy, config.seed) for t in tasks]
        committed = store.committed_ids()
        new = [tid for tid in tids if tid not in committed]
        new_per_tick.append(len(new))
        assert not {t.task_id for t in tasks} & seen_tasks
        seen_tasks |= {t.task_id for t in tasks}
        with store.writer("web/mail") as w:  # the tick's crawl lands
            for t, tid in zip(tasks, new):
                w.add(
                    Trajectory(
                        trajectory_id=tid,
                        task=t,
                        platform="web",
                        app="mail",
                        policy=config.policy,
                        seed=config.seed,
                        num_steps=1,
                        device=DeviceProfile(viewport_width=8, viewport_height=8),
                        outcome="success",
                        verified_by="state",
                    ),
                    [
                        Step(
                            trajectory_id=tid,
                            index=0,
                            screenshot="ab" * 32,
                            width=8,
                            height=8,
                            action=Action(type=ActionType.DONE),
                        )
                    ],
                )
    n = len(catalog_tasks(storage, "mail", CrawlConfig()))
    assert new_per_tick == [n, n] and n > 0  # tick 2 adds as many trajectories as tick 1
    assert len(store.committed_ids()) == 2 * n
    # Before: a tick crawled the catalog as it is, so after the manual crawl (or tick 1)
    # every one of its trajectories was committed and resume skipped them all.
    manual = {t.task_id for t in catalog_tasks(storage, "mail", CrawlConfig())}
    assert not manual & seen_tasks


def test_the_same_day_gives_the_same_seed_and_mobile_ticks_follow_it():
    day = dt.datetime(2026, 3, 1, 2, 0, tzinfo=dt.UTC)
    a, b = tick(daily_web_crawl, day), tick(daily_web_crawl, day)
    assert [r.run_config for r in a] == [r.run_config for r in b]
    assert len({r.run_key for r in a}) == len(a)
    web = a[0].run_config["ops"]["web_trajectories"]["config"]["task_seed"]
    mobile = tick(daily_mobile_crawl, day)
    assert {r.run_config["ops"]["mobile_trajectories"]["config"]["task_seed"] for r in mobile} == {web}
    nxt = tick(daily_web_crawl, day + dt.timedelta(days=1))[0]
    assert nxt.run_config["ops"]["web_trajectories"]["config"]["task_seed"] > web
