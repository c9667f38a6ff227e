"""The crawl runner on real Chromium against the real sandbox server.

One sandbox server and one browser per module; every crawl writes into a
real RawStore under tmp_path. The module plays 12 episodes to the end (and
two more that are killed on their first step).
"""

from __future__ import annotations

import io
import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from crawlers.allowlist import Allowlist
from crawlers.crawl_driver import CrawlStats, ProgressEvent
from crawlers.episode import EpisodeContext, element_at
from crawlers.guard import SafetyGuard
from crawlers.policies import ReplayPolicy
from crawlers.randomise import DEVICE_PROFILES, FONT_SCALES, episode_seed, fixed, randomise
from crawlers.web_env import WebEnv
from sandbox.crawl import SandboxCrawl, crawl
from sandbox.episode import fetch_state, run_episode
from sandbox.oracle_policy import OraclePolicy
from sandbox.tasks import TEMPLATES, build_catalog
from sandbox.tasks.base import Finish, Tap, Target, TaskTemplate, When
from schemas.actions import ActionType
from schemas.arrow import row_to_step
from schemas.records import Element, Task, trajectory_id_for
from tests.sandbox_fixtures import sandbox_fixtures
from trajforge.store.audit import AuditLog, read_audit
from trajforge.store.raw import RawStore


# -- pure logic -------------------------------------------------------------------
def test_element_at_picks_the_innermost_element_under_the_point():
    page = Element(role="main", name="", bbox=(0.0, 0.0, 1.0, 1.0))
    card = Element(role="link", name="Mug", bbox=(0.1, 0.1, 0.5, 0.5))
    button = Element(role="button", name="Add", bbox=(0.2, 0.4, 0.4, 0.45))
    no_box = Element(role="button", name="Ghost")
    assert element_at([page, card, button, no_box], 0.3, 0.42) == button
    assert element_at([page, card, button], 0.3, 0.2) == card
    assert element_at([page, card, button], 0.9, 0.9) == page
    assert element_at([card], 0.9, 0.9) is None


def test_randomise_is_fixed_by_the_seed_and_covers_every_profile():
    assert randomise(5, "en") == randomise(5, "en")
    draws = [randomise(episode_seed(0, f"t{i}"), lang) for i in range(200) for lang in ("en", "zh")]
    assert {d.name for d, _, _ in draws} == set(DEVICE_PROFILES)
    assert {t for _, t, _ in draws} == {"light", "dark"}
    assert {f for _, _, f in draws} == set(FONT_SCALES)
    for device, theme, scale in draws:  # everything drawn is recorded on the profile
        assert device.theme == theme and device.font_scale == scale
        assert device.locale in ("en-US", "zh-CN")
    phone, _, _ = next(d for d in draws if d[0].name == "phone")
    assert (phone.viewport_width, phone.viewport_height, phone.pixel_ratio, phone.is_mobile) == (
        390,
        844,
        3.0,
        True,
    )
    tablet = DEVICE_PROFILES["tablet"]
    assert (tablet.viewport_width, tablet.viewport_height, tablet.pixel_ratio, tablet.is_mobile) == (
        820,
        1180,
        2.0,
        True,
    )
    assert randomise(1, "zh")[0].locale == "zh-CN"
    with pytest.raises(ValueError, match="'fr'"):
        randomise(1, "fr")


def test_episode_seed_and_trajectory_ids_are_stable_across_processes():
    # Fixed values: a change here means every stored crawl stops resuming.
    assert episode_seed(0, "shop.x:en:0") == episode_seed(0, "shop.x:en:0")
    assert episode_seed(0, "a") != episode_seed(1, "a")
    assert trajectory_id_for("sandbox", "shop.x:en:0", "oracle", 0) == trajectory_id_for(
        "sandbox", "shop.x:en:0", "oracle", 0
    )
    assert (
        len({trajectory_id_for("sandbox", "t", p, s) for p in ("oracle", "random_walk") for s in (0, 1)}) == 4
    )


# -- real browser, real sandbox -----------------------------------------------------

sandbox, env = sandbox_fixtures("module")


def pick_tasks(n_per_lang: int, offset: int = 0) -> list[Task]:
    """`n_per_lang` tasks per language, taken round-robin over the apps (deterministic)."""
    catalog = build_catalog(per_template=1, languages=("en", "zh"), seed=0)
    out = []
    for lang in ("en", "zh"):
        per_app = {}
        for t in sorted(catalog, key=lambda t: t.task_id):
            if t.language == lang:
                per_app.setdefault(t.app, []).append(t)
        interleaved = [t for group in zip(*per_app.values()) for t in group]
        out += interleaved[offset * n_per_lang : (offset + 1) * n_per_lang]
    return out


def check_store(store: RawStore, collection: str) -> tuple[list, list]:
    """Every committed row validates, steps match their trajectory, screenshots decode."""
    trajs = list(store.iter_trajectories(collection))
    ids = [t.trajectory_id for t in trajs]
    assert len(ids) == len(set(ids)), "duplicate trajectory ids"
    steps = []
    for f in store.step_files(collection):
        for row in store.read_table(f).to_pylist():  # a local folder or an object store
            steps.append(row_to_step(row, source=str(f)))  # raises SchemaError if invalid
    per_traj = Counter(s.trajectory_id for s in steps)
    for t in trajs:
        assert per_traj.get(t.trajectory_id, 0) == t.num_steps, t.trajectory_id
        idx = sorted(s.index for s in steps if s.trajectory_id == t.trajectory_id)
        assert idx == list(range(t.num_steps)), f"{t.trajectory_id}: step indices {idx}"
    assert set(per_traj) <= set(ids), "steps without a committed trajectory"
    for s in steps:
        with Image.open(io.BytesIO(store.blobs.get(s.screenshot, s.image_format))) as im:
            im.load()
            assert im.size == (s.width, s.height), (s.trajectory_id, s.index)
    if not isinstance(store.root, Path):
        return trajs, steps  # an object store: readers see committed parts only, by marker
    # No interrupted writes left behind.
    folder = store.root / collection
    assert not list(folder.glob(".*.tmp"))
    n_steps = len(list(folder.glob("part-*.steps.parquet")))
    assert n_steps == len(list(folder.glob("part-*.trajectories.parquet")))
    return trajs, steps


@pytest.mark.slow
def test_oracle_crawl_both_languages_verified_by_state_then_resume(sandbox, env, tmp_path):
    tasks = pick_tasks(2)
    assert {t.language for t in tasks} == {"en", "zh"} and len(tasks) == 4
    store = RawStore(tmp_path / "raw")
    events: list[ProgressEvent] = []
    # An interrupted crawl (one task per language done), then the whole list:
    # only the other two are crawled.
    first = crawl(
        [tasks[0], tasks[2]],
        SandboxCrawl(server_url=sandbox.url, policy="oracle", seed=0, distraction_rate=0.5),
        store=store,
        collection="web/oracle",
        env=env,
    )
    rest = crawl(
        tasks,
        SandboxCrawl(server_url=sandbox.url, policy="oracle", seed=0, distraction_rate=0.5),
        store=store,
        collection="web/oracle",
        env=env,
        progress=events.append,
    )
    seconds = first.seconds + rest.seconds
    print(
        f"\noracle crawl: 4 trajectories, {first.steps + rest.steps} steps in "
        f"{seconds:.1f}s = {(first.steps + rest.steps) / seconds:.2f} steps/s"
    )

    trajs, steps = check_store(store, "web/oracle")
    assert len(trajs) == 4
    for t in trajs:
        assert (t.outcome, t.verified_by, t.error) == ("success", "state", None), (t.task.task_id, t.error)
        assert t.policy == "oracle" and t.platform == "web" and t.source == "crawl"
        assert t.trajectory_id == trajectory_id_for("sandbox", t.task.task_id, "oracle", 0)
        assert t.device.locale == {"en": "en-US", "zh": "zh-CN"}[t.task.language]
        # The session really ran with the drawn theme and font scale.
        state = fetch_state(sandbox.url, t.trajectory_id)
        assert (state["theme"], state["font_scale"]) == (t.device.theme, t.device.font_scale)
        assert t.distractions == state["distractions"]
    assert sum(len(t.distractions) for t in trajs) >= 1  # rate 0.5 over 4 episodes

    # Steps: the observation before each action, a target for every tap, timings.
    assert {s.trajectory_id for s in steps} == {t.trajectory_id for t in trajs}
    for s in steps:
        assert s.url.startswith(sandbox.url) and s.a11y_tree and s.elements
        assert s.guard is None and s.error is None, (s.trajectory_id, s.index, s.error)
        if s.action.type == ActionType.TAP:
            assert s.target is not None and s.target.contains(s.action.x, s.action.y)
        if s.action.type in (ActionType.DONE, ActionType.ANSWER):
            assert s.screen_changed is False
        assert s.started_at > 0 and s.observe_ms > 0
        assert s.act_ms > 0 or s.action.type in (ActionType.DONE, ActionType.ANSWER)
    taps = [s for s in steps if s.action.type == ActionType.TAP]
    assert sum(s.screen_changed for s in taps) >= len(taps) * 0.8
    last = {
        t.trajectory_id: max((s for s in steps if s.trajectory_id == t.trajectory_id), key=lambda s: s.index)
        for t in trajs
    }
    assert all(s.action.type in (ActionType.DONE, ActionType.ANSWER) for s in last.values())

    # Statistics and progress.
    for part, done in ((first, (tasks[0], tasks[2])), (rest, (tasks[1], tasks[3]))):
        assert (part.trajectories, part.success, part.failure, part.error) == (2, 2, 0, 0)
        assert part.steps == sum(t.num_steps for t in trajs if t.task.task_id in {d.task_id for d in done})
        assert part.by_language == {"en": 1, "zh": 1} == part.success_by_language
        assert part.blocked_actions == 0 and part.steps_per_s > 0
    assert (first.skipped, rest.skipped) == (0, 2)
    assert first.steps + rest.steps == len(steps)
    kinds = Counter(e.kind for e in events)
    assert (kinds["skip"], kinds["trajectory"], kinds["step"]) == (2, 2, rest.steps)

    # Audit: every executed action, one line each.
    audit = read_audit(store.root / "audit" / "web" / "oracle.jsonl")
    assert len(audit) == len(steps)
    assert {r["decision"] for r in audit} == {"allowed"}

    # Resume: the same crawl again writes nothing and touches no browser.
    events.clear()
    again = crawl(
        tasks,
        SandboxCrawl(server_url=sandbox.url, policy="oracle", seed=0),
        store=store,
        collection="web/oracle",
        env=env,
        progress=events.append,
    )
    assert (again.trajectories, again.skipped, again.steps) == (0, 4, 0)
    assert [e.kind for e in events] == ["skip"] * 4
    trajs2, steps2 = check_store(store, "web/oracle")
    assert sorted(t.trajectory_id for t in trajs2) == sorted(t.trajectory_id for t in trajs)
    assert len(steps2) == len(steps)
    assert len(read_audit(store.root / "audit" / "web" / "oracle.jsonl")) == len(steps)

    # Replay: the recorded actions of the longest trajectory, played back on the
    # same device and session seed, solve the task again.
    longest = max(trajs, key=lambda t: t.num_steps)
    recorded = sorted((s for s in steps if s.trajectory_id == longest.trajectory_id), key=lambda s: s.index)
    dev = longest.device
    ctx = EpisodeContext(
        trajectory_id=longest.trajectory_id,
        seed=0,
        device=dev,
        blobs=store.blobs,
        guard=SafetyGuard(),
        max_steps=30,
    )
    replayed, replay_steps = run_episode(
        env,
        longest.task,
        ReplayPolicy([s.action for s in recorded]),
        ctx,
        server_url=sandbox.url,
        distraction_rate=0.5,
        template=TEMPLATES[longest.task.template_id],
    )
    env.close_episode()
    assert (replayed.outcome, replayed.verified_by, replayed.policy) == ("success", "state", "replay")
    assert [s.action for s in replay_steps] == [s.action for s in recorded]
    assert [s.url for s in replay_steps] == [s.url for s in recorded]
    assert replayed.distractions == longest.distractions


@pytest.mark.slow
def test_random_walk_records_exploration_without_errors(sandbox, env, tmp_path):
    tasks = pick_tasks(1, offset=1)
    store = RawStore(tmp_path / "raw")
    stats = crawl(
        tasks,
        SandboxCrawl(server_url=sandbox.url, policy="random_walk", seed=3, max_steps=8),
        store=store,
        collection="web/walk",
        env=env,
    )
    trajs, steps = check_store(store, "web/walk")
    assert len(trajs) == 2 and stats.unknown == 2 and stats.error == 0
    for t in trajs:
        assert (t.outcome, t.verified_by, t.policy, t.error) == ("unknown", "none", "random_walk", None)
        assert t.num_steps == 8
    assert all(s.url.startswith(sandbox.url) for s in steps)
    assert all(s.guard is None for s in steps)
    changed = [s.screen_changed for s in steps if s.action.type != ActionType.DONE]
    assert any(changed), "the walk never changed the screen"
    kinds = Counter(s.action.type for s in steps)
    assert kinds[ActionType.DONE] == 2 and kinds[ActionType.TAP] >= 4


class _PayTemplate(TaskTemplate):
    """Walks to the shop's checkout and presses its bait "Pay now" / "立即支付"."""

    template_id = "test.pay"
    app = "shop"

    def plan(self, params, lang):
        cart = "Cart" if lang == "en" else "购物车"
        checkout = "Proceed to checkout" if lang == "en" else "去结算"
        pay = "Pay now" if lang == "en" else "立即支付"
        return [
            Tap(Target(cart, role="link")),
            Tap(Target(checkout, role="link")),
            Tap(Target(pay, role="button")),
            Finish(),
        ]

    def success(self, params, state, answer, lang):
        return True  # never reached: the guard ends the episode first


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_guard_blocks_payment_ends_the_episode_and_audits_it(sandbox, env, tmp_path, lang):
    template = _PayTemplate()
    task = Task(
        task_id=f"test.pay:{lang}:0",
        instruction="Pay for the cart",
        language=lang,
        app="shop",
        template_id=template.template_id,
        params={"seed": 0},
    )
    store = RawStore(tmp_path / "raw")
    tid = f"pay-{lang}"
    with AuditLog(store.root / "audit" / "pay.jsonl") as audit:
        ctx = EpisodeContext(
            trajectory_id=tid,
            seed=0,
            device=fixed("desktop", lang),
            blobs=store.blobs,
            guard=SafetyGuard(),
            max_steps=30,
            audit=audit,
        )
        traj, steps = run_episode(
            env,
            task,
            OraclePolicy(template, task),
            ctx,
            server_url=sandbox.url,
            distraction_rate=0.0,
            template=template,
        )
    blocked = steps[-1]
    assert blocked.guard is not None and blocked.guard.startswith("blocked:payment: ")
    assert blocked.target.name == ("Pay now" if lang == "en" else "立即支付")
    assert blocked.screen_changed is None and blocked.act_ms == 0.0  # never executed
    assert all(s.guard is None for s in steps[:-1])
    assert (traj.outcome, traj.verified_by) == ("failure", "none")
    assert traj.error.startswith("guard blocked:payment")
    assert traj.num_steps == len(steps)
    assert "/shop/payment" not in env.observe().url  # the payment page was never opened
    state = fetch_state(sandbox.url, tid)["state"]
    assert state["payments"] == [] and state["cart"]  # nothing paid, the cart untouched
    audit_rows = read_audit(store.root / "audit" / "pay.jsonl")
    assert [r["decision"] for r in audit_rows] == ["allowed"] * (len(steps) - 1) + ["blocked"]
    assert audit_rows[-1]["category"] == "payment" and audit_rows[-1]["trajectory_id"] == tid


@pytest.mark.slow
def test_a_killed_browser_is_restarted_and_every_task_stored_once(sandbox, tmp_path):
    # Tasks whose plans have 3+ steps: a kill after the first action always hits
    # a live episode (the next action needs the browser).
    tasks = [
        t
        for t in pick_tasks(3, offset=1)
        if sum(not isinstance(p, When) for p in TEMPLATES[t.template_id].plan(t.params, t.language)) >= 3
    ]
    tasks = [next(t for t in tasks if t.language == lang) for lang in ("en", "zh")]
    store = RawStore(tmp_path / "raw")
    kills: list[tuple[str, int]] = []
    with WebEnv.launch(
        headless=True, step_timeout_s=10.0, request_filter=Allowlist([sandbox.url])
    ) as crash_env:

        def killer(event: ProgressEvent) -> None:
            # Kill Chromium after the first step of each task, mid-episode.
            if (
                event.kind == "step"
                and event.action not in ("done", "answer")
                and event.task_id not in {k for k, _ in kills}
            ):
                pid = crash_env.browser_pid
                kills.append((event.task_id, pid))
                os.kill(pid, signal.SIGKILL)

        stats = crawl(
            tasks,
            SandboxCrawl(
                server_url=sandbox.url,
                policy="oracle",
                seed=0,
                distraction_rate=0.0,
                retries=2,
                batch_size=1,
                devices=["desktop", "laptop"],
            ),
            store=store,
            collection="web/crash",
            env=crash_env,
            progress=killer,
        )
        assert crash_env.is_alive()
        assert crash_env.browser_pid not in {pid for _, pid in kills}
    assert len(kills) == 2 and stats.retries == 2
    trajs, steps = check_store(store, "web/crash")
    assert sorted(t.task.task_id for t in trajs) == sorted(t.task_id for t in tasks)
    assert all(t.outcome == "success" for t in trajs), [(t.task.task_id, t.error) for t in trajs]
    assert (stats.trajectories, stats.success, stats.error) == (2, 2, 0)
    # The audit shows the interrupted attempt and the full retry of each killed task.
    audit = read_audit(store.root / "audit" / "web" / "crash.jsonl")
    for task_id, _ in kills:
        tid = trajectory_id_for("sandbox", task_id, "oracle", 0)
        attempts = Counter(r["attempt"] for r in audit if r["trajectory_id"] == tid)
        # Attempt 0 stopped early: its actions up to the kill (and the one that hit
        # the dead browser) are audited; attempt 1 ran to the end.
        assert 2 <= attempts[0] <= 3 and attempts[1] >= attempts[0] - 1, attempts


@pytest.mark.slow
def test_a_task_that_keeps_crashing_is_stored_as_an_error(sandbox, tmp_path):
    tasks = pick_tasks(1, offset=4)[:1]
    store = RawStore(tmp_path / "raw")
    with WebEnv.launch(
        headless=True, step_timeout_s=10.0, request_filter=Allowlist([sandbox.url])
    ) as crash_env:

        def killer(event: ProgressEvent) -> None:
            if event.kind == "step":
                os.kill(crash_env.browser_pid, signal.SIGKILL)

        stats = crawl(
            tasks,
            SandboxCrawl(server_url=sandbox.url, policy="oracle", retries=1),
            store=store,
            collection="web/broken",
            env=crash_env,
            progress=killer,
        )
        assert crash_env.is_alive()  # left ready for the next task
    trajs, steps = check_store(store, "web/broken")
    assert len(trajs) == 1 and steps == []
    assert trajs[0].outcome == "error" and trajs[0].error.startswith("BrowserCrashed")
    assert (stats.error, stats.retries, stats.trajectories) == (1, 1, 1)


def test_crawl_refuses_bad_configuration_before_any_browser_work(tmp_path):
    store = RawStore(tmp_path / "raw")
    task = Task(task_id="x:en:0", instruction="x", language="en", app="shop", template_id="no.such.template")
    with pytest.raises(KeyError, match="no.such.template"):
        crawl([task], SandboxCrawl(server_url="http://127.0.0.1:9"), store=store, collection="c")
    with pytest.raises(ValueError, match="policy"):
        crawl([], SandboxCrawl(server_url="http://127.0.0.1:9", policy="bogus"), store=store, collection="c")
    free = task.model_copy(update={"template_id": None})
    with pytest.raises(ValueError, match="needs a template_id"):
        crawl([free], SandboxCrawl(server_url="http://127.0.0.1:9"), store=store, collection="c")
    with pytest.raises(ValueError, match="'watch'"):
        crawl(
            [],
            SandboxCrawl(server_url="http://127.0.0.1:9", devices=["desktop", "watch"]),
            store=store,
            collection="c",
        )
    assert not (store.root / "c").exists() or not list((store.root / "c").iterdir())


def test_stats_count_outcomes_and_languages():
    stats = CrawlStats()
    task = build_catalog(1, ("zh",))[0]
    base = dict(task=task, platform="web", app=task.app, device=fixed("phone", "zh"), policy="oracle")
    from schemas.records import Trajectory

    for i, outcome in enumerate(["success", "failure", "success", "error", "unknown"]):
        stats.count(Trajectory(trajectory_id=f"t{i}", outcome=outcome, num_steps=i, **base))
    d = stats.as_dict()
    assert (d["trajectories"], d["steps"], d["success"], d["failure"], d["error"], d["unknown"]) == (
        5,
        10,
        2,
        1,
        1,
        1,
    )
    assert d["by_language"] == {"zh": 5} and d["success_by_language"] == {"zh": 2}
