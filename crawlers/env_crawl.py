"""Crawl an environment file: its tasks (or exploration episodes) into the raw store.

`crawl_environment` is what `trajforge crawl ENV_FILE` runs: one browser
allowed to reach only the environment's origins (the filtering proxy), each
task played by a policy (random_walk, frontier, replay, oracle through the
environment's plugin, agent through a VLM backend), verified by the
environment's verifier, written whole with a stable id (a re-run resumes
without duplicates), retried when the browser dies or the start page fails,
and stored as an error trajectory that says why once out of retries.

The frontier walk (crawlers/frontier.py) always explores: its episodes share
the collection's screen graph (crawlers/screen_graph.py), read at the start
(so a re-run resumes it), each episode's policy playing on a copy of it, the
graph absorbing each episode once committed (one episode per batch) and saved
beside it.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.actions import Action
from schemas.environment import Display, Environment, ExploreSpec
from schemas.records import DeviceProfile, Step, Task, Trajectory
from trajforge.store.raw import RawStore

from .agent import AgentPolicy, AgentSettings
from .crawl_driver import CrawlRun, CrawlStats, EnvCrawl, ProgressEvent, RetryPolicy, run_crawl
from .device_pool import PoolError
from .env_runtime import EnvironmentRuntime, load_callable
from .env_source import open_env_source
from .episode import CrawlEnv, EpisodeContext, run_env_episode
from .frontier import FrontierPolicy
from .guard import SafetyGuard
from .policies import Policy, RandomWalkPolicy, ReplayPolicy
from .pool_slots import EnvPool
from .randomise import DEVICE_PROFILES, LOCALES, MOBILE_PROFILES, THEMES, episode_seed
from .screen_graph import ScreenGraph, graph_path, load_graph
from .scripted import ScriptedPolicy

ENV_POLICIES = ("oracle", "random_walk", "frontier", "replay", "agent")
# Exploration episodes made when only a time budget is given (`minutes`, no `episodes`).
TIMED_EPISODES = 10_000


@dataclass
class EnvCrawlStats(CrawlStats):
    """A crawl's figures, plus the walk's no-op rate and the step and reset latencies."""

    environment: str = ""
    noop_steps: int = 0
    step_ms: list[float] = field(default_factory=list)
    reset_ms: list[float] = field(default_factory=list)
    graph: dict | None = None  # the frontier walk's screen graph: ScreenGraph.summary()
    graph_file: str | None = None

    def summary(self) -> dict:
        def pct(values: list[float], q: float) -> float | None:
            if not values:
                return None
            ordered = sorted(values)
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

        acted = len(self.step_ms)
        verified = self.success + self.failure
        extra = {"graph": self.graph, "graph_file": self.graph_file} if self.graph is not None else {}
        return {
            **extra,
            "not_started": self.not_started,
            "environment": self.environment,
            "episodes": self.trajectories,
            "skipped": self.skipped,
            "replayed_errors": self.replayed_errors,
            "steps": self.steps,
            "success": self.success,
            "failure": self.failure,
            "error": self.error,
            "unknown": self.unknown,
            "verified": self.verified,
            "error_reasons": dict(sorted(self.error_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "verified_success_rate": round(self.success / verified, 3) if verified else None,
            "noop_rate": round(self.noop_steps / acted, 3) if acted else None,
            "step_ms_p50": pct(self.step_ms, 0.5),
            "step_ms_p95": pct(self.step_ms, 0.95),
            "reset_ms_p50": pct(self.reset_ms, 0.5),
            "steps_per_s": self.steps_per_s,
            "retries": self.retries,
            "blocked_requests": self.blocked_requests,
            "seconds": self.seconds,
        }


def environment_tasks(
    environment: Environment, *, episodes: int | None = None, explore: bool = False, timed: bool = False
) -> list[Task]:
    """The tasks to play: the environment's own, or `explore.episodes` exploration tasks
    (with `explore`, or when the file has no tasks).

    `episodes` caps the task list, or sets the number of exploration episodes.
    `timed` (a time budget): without `episodes` here or in the file's `explore`,
    TIMED_EPISODES exploration episodes (the time stops them).
    """
    tasks = environment.as_tasks()
    if tasks and not explore:
        return tasks[:episodes] if episodes else tasks
    spec = environment.explore or (ExploreSpec() if explore else None)
    if spec is None and environment.instruction_js is None:
        return []
    count = episodes or (spec.episodes if spec else 1)
    if timed and not episodes and (spec is None or "episodes" not in spec.model_fields_set):
        count = TIMED_EPISODES
    langs = environment.languages or ["en"]
    made = []
    for i in range(count):
        lang = langs[i % len(langs)]
        instruction = (
            "(read from the page)"
            if environment.instruction_js
            else f"Explore {environment.name}"
            if lang == "en"
            else f"探索{environment.name}"
        )
        made.append(
            Task(
                task_id=f"{environment.name}-explore-{i:05d}",
                instruction=instruction,
                language=lang,
                app=environment.name,
                params={"episode": i, "explore": True},
            )
        )
    return made


def points_device(environment: Environment, task: Task) -> str | None:
    """The device a task's demonstration of recorded points was recorded on (a
    synthesised task's `params.device`): the points land on what they touched only on
    that screen. None when the demonstration names its elements (a script, a plugin)."""
    if environment.oracle or task.params.get("script"):
        return None
    return task.params.get("device")


def device_for(
    environment: Environment, task: Task, seed: int, *, profile: str | None = None
) -> DeviceProfile:
    """The screen asked for a task's episode: the environment's viewport, or a profile it
    names drawn by the seed (`profile`, one of them, when the episode must have that
    screen); the locale follows the task's language, the theme the seed."""
    if environment.platform == "desktop":
        return desktop_device(environment)
    rng = random.Random(f"env-device:{episode_seed(seed, task.task_id)}")
    mobile = environment.platform != "web"
    if environment.viewport is not None:
        vp = environment.viewport
        base = DeviceProfile(
            name=f"{environment.name}-viewport",
            viewport_width=vp.width,
            viewport_height=vp.height,
            pixel_ratio=vp.pixel_ratio,
            is_mobile=vp.is_mobile or mobile,
        )
    else:
        known = {**DEVICE_PROFILES, **MOBILE_PROFILES}
        names = environment.devices or (["phone"] if mobile else ["desktop"])
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(
                f"environment '{environment.name}', field 'devices': unknown "
                f"profile(s) {unknown}; known: {sorted(known)}"
            )
        drawn = rng.choice(sorted(names))
        base = known[profile if profile in names else drawn]
    # The theme (prefers-color-scheme) and locale are asked for; the episode records
    # the ones the page showed (env_device). A font scale is not applied to a
    # foreign page, so it is recorded as 1.0.
    return base.model_copy(
        update={"locale": LOCALES.get(task.language, "en-US"), "theme": rng.choice(THEMES), "font_scale": 1.0}
    )


def desktop_device(environment: Environment) -> DeviceProfile:
    """A desktop episode's screen: its X display (DPI over 96 as the pixel ratio). Nothing
    is emulated: the app shows its toolkit's default (light) theme and, under the session's
    C locale, its untranslated (English) words, whatever the task's language."""
    d = environment.display or Display()
    return DeviceProfile(
        name=f"desktop-{d.width}x{d.height}",
        viewport_width=d.width,
        viewport_height=d.height,
        pixel_ratio=d.dpi / 96,
        is_mobile=False,
    )


def make_env_policy(
    policy: str,
    task: Task,
    environment: Environment,
    *,
    seed: int,
    max_steps: int,
    guard: SafetyGuard,
    backend=None,
    replay: dict[str, list[Action]] | None = None,
    graph: ScreenGraph | None = None,
) -> Policy:
    ep_seed = episode_seed(seed, task.task_id)
    if policy == "random_walk":
        # The walk says `done` on its last step, inside the runner's step budget.
        return RandomWalkPolicy(ep_seed, max_steps=max_steps, lang=task.language, guard=guard)
    if policy == "frontier":
        graph = graph if graph is not None else ScreenGraph(environment.volatile, guard)
        explore = environment.explore
        return FrontierPolicy(
            graph,
            ep_seed,
            max_steps=max_steps,
            lang=task.language,
            guard=guard,
            keys=tuple(explore.keys) if explore else (),
            retype=explore.retype if explore else 0.0,
        )
    if policy == "replay":
        actions = (replay or {}).get(task.task_id)
        if actions is None:
            actions = [Action.model_validate(a) for a in task.params.get("actions", [])]
        return ReplayPolicy(actions)
    if policy == "oracle":
        # The environment's planner plugin, else the demonstration in the task file.
        if environment.oracle:
            return load_callable(environment.oracle)(task, environment)
        if "script" in task.params:
            return ScriptedPolicy(task.params["script"])
        if task.params.get("actions"):  # recorded points, played on their walk's screen (points_device)
            return ReplayPolicy([Action.model_validate(a) for a in task.params["actions"]])
        raise ValueError(
            f"environment '{environment.name}', task '{task.task_id}': the oracle "
            f"policy needs 'oracle: module:function' in the environment file or "
            f"a params.script or params.actions demonstration in the task"
        )
    if policy == "agent":
        if backend is None:
            raise ValueError("the agent policy needs a VLM backend (--vlm-config)")
        return AgentPolicy(backend, task, AgentSettings(max_steps=max_steps, seed=ep_seed))
    raise ValueError(f"policy={policy!r}: expected one of {ENV_POLICIES}")


def crawl_environment(
    environment: Environment,
    how: EnvCrawl = EnvCrawl(),
    *,
    store: RawStore,
    collection: str | None = None,
    env: CrawlEnv | None = None,
    pool: EnvPool | None = None,
    progress: Callable[[ProgressEvent], None] | None = None,
) -> EnvCrawlStats:
    """Crawl `environment` into `store`/`collection` (default: its name) as `how` says;
    the figures.

    `env`, when given, is used as is (its own request filter); `pool` (an
    EnvPool: WebEnvPool, DevicePool, RayEnvPool) plays up to `pool.size`
    episodes at once, each attempt on a fresh lease; otherwise the crawl opens
    its own (env_source.open_env_source: a headless Chromium allowed to reach
    only the environment's origins, or a desktop file's DesktopEnv).
    The trajectories do not depend on which.
    """
    policy, seed, replay = how.policy, how.seed, how.replay
    demo = policy in ("oracle", "replay")  # a task's demonstration is played
    if policy not in ENV_POLICIES:
        raise ValueError(f"policy={policy!r}: expected one of {ENV_POLICIES}")
    runtime = EnvironmentRuntime(environment, judge=how.judge)
    collection = collection or environment.name
    tasks = how.tasks
    spec = environment.explore
    file_minutes = spec.minutes if spec is not None else None
    if tasks is None:
        # The walk explores where the file says how (the frontier walk always does);
        # a replay plays what it was given.
        explore = policy == "frontier" or (spec is not None and policy == spec.policy)
        timed = how.minutes is not None or (explore and file_minutes is not None)
        tasks = environment_tasks(environment, episodes=how.episodes, explore=explore, timed=timed)
        if replay is not None:
            tasks = [
                t
                for t in tasks + environment_tasks(environment, episodes=how.episodes, explore=not explore)
                if t.task_id in replay
            ]
    tasks = list(tasks)
    exploring = bool(tasks) and all(t.params.get("explore") for t in tasks)
    if exploring and how.minutes is None and file_minutes is not None:
        how = dataclasses.replace(how, minutes=file_minutes)  # the file's time budget for walks
    # An app that makes up its own task may have no `explore`: its walks take max_steps.
    walk_steps = environment.explore.max_steps if environment.explore else environment.max_steps
    steps_budget = how.max_steps or (walk_steps if exploring else environment.max_steps)
    guard = how.guard or SafetyGuard()
    stats = EnvCrawlStats(environment=environment.name)
    graph = None
    if policy == "frontier":  # the shared graph: each episode committed alone, then absorbed
        how = dataclasses.replace(how, batch_size=1)
        graph = load_graph(store, collection, environment.volatile, guard)
        stats.graph, stats.graph_file = graph.summary(), str(graph_path(store, collection))

    def figures(traj: Trajectory, steps: list[Step]) -> None:
        stats.noop_steps += sum(1 for s in steps if s.screen_changed is False and s.act_ms is not None)
        stats.step_ms.extend(s.act_ms for s in steps if s.act_ms is not None)
        if graph is not None:
            graph.absorb(traj.trajectory_id, steps)
            graph.save(graph_path(store, collection))
            stats.graph = graph.summary()

    def make_policy(task: Task) -> Policy:
        own = None
        if graph is not None:
            with crawl.lock:  # pool workers absorb from their threads
                own = graph.copy()
        return make_env_policy(
            policy,
            task,
            environment,
            seed=seed,
            max_steps=steps_budget,
            guard=guard,
            backend=how.backend,
            replay=replay,
            graph=own,
        )

    def play(task: Task, env, ctx: EpisodeContext) -> tuple[Trajectory, list[Step]]:
        t0 = time.perf_counter()
        traj, steps = run_env_episode(env, runtime, task, make_policy, ctx)
        with crawl.lock:
            stats.reset_ms.append(
                round(steps[0].observe_ms, 1) if steps else round((time.perf_counter() - t0) * 1000, 1)
            )
        return traj, steps

    def verifier_of(task: Task) -> str | None:
        spec = runtime.verifier_for(task)
        return spec.kind if spec else None

    # A configuration error (policy, oracle) stops the crawl, as does a pool with no env left.
    crawl = CrawlRun(
        config=how,
        store=store,
        collection=collection,
        source_name=environment.source,
        retry=RetryPolicy(how.retries, fatal=(PoolError, ValueError), crash_name="BrowserCrashed"),
        play=play,
        verifier_of=verifier_of,
        stats=stats,
        progress=progress,
        on_write=figures,
        platform=environment.platform,
    )

    def episode_for(task: Task, tid: str) -> EpisodeContext:
        return EpisodeContext(
            trajectory_id=tid,
            seed=seed,
            device=device_for(
                environment, task, seed, profile=points_device(environment, task) if demo else None
            ),
            blobs=store.blobs,
            guard=guard,
            max_steps=steps_budget,
        )

    with open_env_source(
        environment, env=env, pool=pool, image_format=how.image_format, step_timeout_s=how.step_timeout_s
    ) as source:
        run_crawl(crawl, tasks, episode_for, source)
    return stats
