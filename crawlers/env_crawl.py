"""Crawl an environment file: its tasks (or exploration episodes) into the raw store.

`crawl_environment` is what `trajforge crawl ENV_FILE` runs: one browser
allowed to reach only the environment's origins (the filtering proxy), each
task played by a policy (random_walk, replay, oracle through the
environment's plugin, agent through a VLM backend), verified by the
environment's verifier, written whole with a stable id (a re-run resumes
without duplicates), retried when the browser dies or the start page fails,
and stored as an error trajectory that says why once out of retries.
"""
from __future__ import annotations

import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from schemas.actions import Action
from schemas.environment import Environment
from schemas.records import DeviceProfile, Step, Task, Trajectory, trajectory_id_for
from trajforge.store.raw import RawStore

from .allowlist import Allowlist
from .crawl_episode import EpisodeContext, EpisodeInfo, env_platform
from .crawl_loop import Recorder, run_pooled
from .crawl_tasks import CrawlStats, ProgressEvent, close_episode_quietly
from .env_episode import run_env_episode
from .env_runtime import EnvironmentRuntime, JudgeFn, load_callable
from .guard import SafetyGuard
from trajforge.store.audit import AuditLog
from .policies import Policy, RandomWalkPolicy, ReplayPolicy
from .scripted import ScriptedPolicy
from .randomise import DEVICE_PROFILES, LOCALES, MOBILE_PROFILES, THEMES, episode_seed
from .web_env import BrowserCrashed, WebEnv

ENV_POLICIES = ("oracle", "random_walk", "replay", "agent")


@dataclass
class EnvCrawlStats(CrawlStats):
    """A crawl's figures, plus the walk's no-op rate and the step and reset latencies."""

    environment: str = ""
    noop_steps: int = 0
    step_ms: list[float] = field(default_factory=list)
    reset_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        def pct(values: list[float], q: float) -> float | None:
            if not values:
                return None
            ordered = sorted(values)
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)
        acted = len(self.step_ms)
        verified = self.success + self.failure
        return {"environment": self.environment, "episodes": self.trajectories,
                "skipped": self.skipped, "steps": self.steps, "success": self.success,
                "failure": self.failure, "error": self.error, "unknown": self.unknown,
                "verified_success_rate": round(self.success / verified, 3) if verified else None,
                "noop_rate": round(self.noop_steps / acted, 3) if acted else None,
                "step_ms_p50": pct(self.step_ms, 0.5), "step_ms_p95": pct(self.step_ms, 0.95),
                "reset_ms_p50": pct(self.reset_ms, 0.5), "steps_per_s": self.steps_per_s,
                "retries": self.retries, "blocked_requests": self.blocked_requests,
                "seconds": self.seconds}


def environment_tasks(environment: Environment, *, episodes: int | None = None,
                      explore: bool = False) -> list[Task]:
    """The tasks to play: the environment's own, or `explore.episodes` exploration tasks
    (with `explore`, or when the file has no tasks).

    `episodes` caps the task list, or sets the number of exploration episodes.
    """
    tasks = environment.as_tasks()
    if tasks and not explore:
        return tasks[:episodes] if episodes else tasks
    if environment.explore is None and environment.instruction_js is None:
        return []
    count = episodes or (environment.explore.episodes if environment.explore else 1)
    langs = environment.languages or ["en"]
    made = []
    for i in range(count):
        lang = langs[i % len(langs)]
        instruction = ("(read from the page)" if environment.instruction_js else
                       f"Explore {environment.name}" if lang == "en" else f"探索{environment.name}")
        made.append(Task(task_id=f"{environment.name}-explore-{i:05d}", instruction=instruction,
                         language=lang, app=environment.name,
                         params={"episode": i, "explore": True}))
    return made


def device_for(environment: Environment, task: Task, seed: int) -> DeviceProfile:
    """The screen of a task's episode: the environment's viewport, or a profile it names
    drawn by the seed; the locale follows the task's language, the theme the seed."""
    rng = random.Random(f"env-device:{episode_seed(seed, task.task_id)}")
    mobile = environment.platform != "web"
    if environment.viewport is not None:
        vp = environment.viewport
        base = DeviceProfile(name=f"{environment.name}-viewport", viewport_width=vp.width,
                             viewport_height=vp.height, pixel_ratio=vp.pixel_ratio,
                             is_mobile=vp.is_mobile or mobile)
    else:
        known = {**DEVICE_PROFILES, **MOBILE_PROFILES}
        names = environment.devices or (["phone"] if mobile else ["desktop"])
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"environment '{environment.name}', field 'devices': unknown "
                             f"profile(s) {unknown}; known: {sorted(known)}")
        base = known[rng.choice(sorted(names))]
    # The theme is a real emulation (prefers-color-scheme); a font scale is not
    # applied to a foreign page, so it is recorded as 1.0.
    return base.model_copy(update={"locale": LOCALES.get(task.language, "en-US"),
                                   "theme": rng.choice(THEMES), "font_scale": 1.0})


def make_env_policy(policy: str, task: Task, environment: Environment, *, seed: int,
                    max_steps: int, guard: SafetyGuard, backend=None,
                    replay: dict[str, list[Action]] | None = None) -> Policy:
    ep_seed = episode_seed(seed, task.task_id)
    if policy == "random_walk":
        # The walk says `done` on its last step, inside the runner's step budget.
        return RandomWalkPolicy(ep_seed, max_steps=max_steps, lang=task.language, guard=guard)
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
        raise ValueError(f"environment '{environment.name}', task '{task.task_id}': the oracle "
                         f"policy needs 'oracle: module:function' in the environment file or "
                         f"a params.script demonstration in the task")
    if policy == "agent":
        if backend is None:
            raise ValueError("the agent policy needs a VLM backend (--vlm-config)")
        from .agent import AgentPolicy
        return AgentPolicy(backend, task, max_steps=max_steps, seed=ep_seed)
    raise ValueError(f"policy={policy!r}: expected one of {ENV_POLICIES}")


def crawl_environment(environment: Environment, *, store: RawStore, collection: str | None = None,
                      policy: str = "random_walk", seed: int = 0, episodes: int | None = None,
                      tasks: list[Task] | None = None, max_steps: int | None = None,
                      retries: int = 2, env: WebEnv | None = None, judge: JudgeFn | None = None,
                      backend=None, replay: dict[str, list[Action]] | None = None,
                      image_format: str = "png", step_timeout_s: float = 10.0,
                      guard: SafetyGuard | None = None, batch_size: int = 16,
                      pool=None,
                      progress: Callable[[ProgressEvent], None] | None = None) -> EnvCrawlStats:
    """Crawl `environment` into `store`/`collection` (default: its name); the figures.

    `env`, when given, is used as is (its own request filter); `pool` (a
    WebEnvPool, or any pool with `submit` and `lease`) plays up to `pool.size`
    episodes at once, each attempt on a fresh lease; otherwise one headless
    Chromium is launched, allowed to reach only the environment's origins.
    The trajectories do not depend on which. `replay` maps task ids to the
    actions to play back (policy replay).
    """
    if pool is not None and env is not None:
        raise ValueError("crawl_environment: give env= or pool=, not both")
    if policy not in ENV_POLICIES:
        raise ValueError(f"policy={policy!r}: expected one of {ENV_POLICIES}")
    if environment.platform not in ("web", "mobile_web") and env is None and pool is None:
        raise ValueError(f"environment '{environment.name}': platform {environment.platform} "
                         f"runs on an Appium device; pass env= (a MobileEnv) for it")
    runtime = EnvironmentRuntime(environment, judge=judge)
    collection = collection or environment.name
    if tasks is None:
        # The walk explores where the file says how; a replay plays what it was given.
        explore = environment.explore is not None and policy == environment.explore.policy
        tasks = environment_tasks(environment, episodes=episodes, explore=explore)
        if replay is not None:
            tasks = [t for t in tasks + environment_tasks(environment, episodes=episodes,
                                                          explore=not explore)
                     if t.task_id in replay]
    tasks = list(tasks)
    exploring = bool(tasks) and all(t.params.get("explore") for t in tasks)
    steps_budget = max_steps or (environment.explore.max_steps if exploring
                                 else environment.max_steps)
    guard = guard or SafetyGuard()
    stats = EnvCrawlStats(environment=environment.name)
    started = time.perf_counter()
    own_env = env is None and pool is None
    if own_env:
        env = WebEnv.launch(headless=True, image_format=image_format,
                            step_timeout_s=step_timeout_s,
                            request_filter=Allowlist(environment.origins()))
    audit = store.audit_log(collection)

    def figures(traj: Trajectory, steps: list[Step]) -> None:
        stats.noop_steps += sum(1 for s in steps if s.screen_changed is False
                                and s.act_ms is not None)
        stats.step_ms.extend(s.act_ms for s in steps if s.act_ms is not None)

    rec = Recorder(stats, total=len(tasks), desc=f"crawl {environment.name}",
                   progress=progress, on_write=figures)
    common = dict(policy=policy, seed=seed, max_steps=steps_budget, retries=retries,
                  store=store, guard=guard, audit=audit, stats=stats, emit=rec.emit,
                  backend=backend, replay=replay, lock=rec.lock)
    try:
        with store.writer(collection, batch_size=batch_size) as rec.writer:
            todo = rec.claim(((t,) for t in tasks),
                             lambda t: trajectory_id_for(environment.source, t.task_id,
                                                         policy, seed))
            if pool is None:
                for task, tid in todo:
                    rec.write(task, *_crawl_one(_own(env), runtime, task, tid, **common))
            else:
                run_pooled(pool, todo,
                           lambda task, tid: _crawl_one(pool.lease, runtime, task, tid, **common),
                           rec.write)
    finally:
        rec.close(started)
        audit.close()
        if own_env:
            env.close()
    return stats


@contextmanager
def _own_lease(env):
    """A lease of the crawl's own env: restarted when it died, its episode closed after."""
    if not env.is_alive():
        env.restart()
    try:
        yield env
    except BrowserCrashed:
        env.restart()
        raise
    finally:
        close_episode_quietly(env)


def _own(env):
    return lambda: _own_lease(env)


def _crawl_one(acquire, runtime: EnvironmentRuntime, task: Task, tid: str, *, policy: str,
               seed: int, max_steps: int, retries: int, store: RawStore, guard: SafetyGuard,
               audit: AuditLog, stats: EnvCrawlStats, emit, backend, replay, lock
               ) -> tuple[Trajectory, list[Step]]:
    """One task, retried from the start (on a fresh lease) while the browser dies or the
    start page fails; out of retries, an error trajectory that says why."""
    from .device_pool import PoolError
    environment = runtime.environment
    device = device_for(environment, task, seed)
    last_error, platform = "", environment.platform
    for attempt in range(retries + 1):
        info = EpisodeInfo()
        t0 = time.perf_counter()
        try:
            with acquire() as env:
                platform = env_platform(env)
                ctx = EpisodeContext(
                    trajectory_id=tid, seed=seed, device=device, blobs=store.blobs, guard=guard,
                    max_steps=max_steps, audit=audit, attempt=attempt, info=info,
                    on_step=lambda s: emit("step", task, tid, step_index=s.index,
                                           action=s.action.type.value))
                traj, steps = run_env_episode(
                    env, runtime, task,
                    lambda t: make_env_policy(policy, t, environment, seed=seed,
                                              max_steps=max_steps, guard=guard,
                                              backend=backend, replay=replay), ctx)
                close_episode_quietly(env)
        except (PoolError, ValueError):
            raise  # no browser left, or a configuration error (policy, oracle): stop the crawl
        except BrowserCrashed as e:  # the lease restarts (or drops) that browser
            last_error = f"BrowserCrashed: {e}"
        except Exception as e:  # noqa: BLE001 - a page or app problem must not stop the crawl
            last_error = f"{type(e).__name__}: {e}"
        else:
            with lock:
                stats.reset_ms.append(round(steps[0].observe_ms, 1) if steps else
                                      round((time.perf_counter() - t0) * 1000, 1))
                stats.blocked_actions += info.blocked_actions
                stats.blocked_requests += len(info.blocked_requests)
            return traj, steps
        if attempt < retries:
            with lock:
                stats.retries += 1
            emit("retry", task, tid, message=last_error)
    return Trajectory(trajectory_id=tid, task=task, platform=platform,
                      app=task.app, device=device, source="crawl",
                      source_name=environment.source, policy=policy, seed=seed,
                      outcome="error", verified_by="none", num_steps=0, error=last_error,
                      verifier=(runtime.verifier_for(task).kind
                                if runtime.verifier_for(task) else None),
                      created_at=time.time()), []
