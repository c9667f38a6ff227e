"""One task of a crawl, retried until it yields one whole episode; the crawl's statistics.

`crawl_task` plays a task on one env (restarted when the browser dies);
`crawl_task_pooled` plays it on envs leased from a pool (a DevicePool of
Appium sessions or a WebEnvPool of browsers), one lease per attempt. The
steps of a failed attempt are dropped with it; out of retries, the task is
stored as an error with no steps, so the next crawl does not retry it forever.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field

from sandbox.tasks.base import TaskTemplate
from schemas.records import DeviceProfile, Step, Task, Trajectory
from trajforge.store import RawStore

from .crawl_episode import SOURCE_NAME, CrawlEnv, EpisodeInfo, env_platform, run_episode
from .crawl_profiles import draw_device
from .guard import AuditLog, SafetyGuard
from .policies import OraclePolicy, Policy, RandomWalkPolicy
from .randomise import episode_seed
from .web_env import BrowserCrashed

log = logging.getLogger(__name__)

# A task's profiles and whether it is a mobile task (crawl_profiles.profiles_for).
TaskProfiles = tuple[dict[str, DeviceProfile], bool]


@dataclass
class CrawlStats:
    trajectories: int = 0        # written by this call
    steps: int = 0
    success: int = 0
    failure: int = 0
    error: int = 0
    unknown: int = 0
    skipped: int = 0             # already committed before this call
    retries: int = 0             # episodes restarted after the browser or session died
    reconnects: int = 0          # device sessions a pool reopened during this call
    server_restarts: int = 0     # Appium server restarts by the pool during this call
    blocked_actions: int = 0
    blocked_requests: int = 0
    seconds: float = 0.0
    steps_per_s: float = 0.0
    by_language: dict[str, int] = field(default_factory=dict)
    success_by_language: dict[str, int] = field(default_factory=dict)

    def count(self, traj: Trajectory) -> None:
        self.trajectories += 1
        self.steps += traj.num_steps
        setattr(self, traj.outcome, getattr(self, traj.outcome) + 1)
        lang = traj.task.language
        self.by_language[lang] = self.by_language.get(lang, 0) + 1
        if traj.outcome == "success":
            self.success_by_language[lang] = self.success_by_language.get(lang, 0) + 1

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ProgressEvent:
    """One thing that happened in a crawl, for logging callbacks.

    kind: "step" (a step was recorded), "trajectory" (one was written),
    "skip" (already stored), "retry" (the browser or session died; retrying).
    In a pool crawl, events come from the worker threads one at a time (under
    a lock), and `slot` names the pool slot the episode runs on.
    """

    kind: str
    task_id: str
    trajectory_id: str
    stats: CrawlStats
    step_index: int | None = None
    action: str | None = None        # the step's action type
    outcome: str | None = None
    message: str | None = None
    slot: str | None = None          # "<device>#<session>" (or "browser#<n>") in a pool crawl


def template_for(task: Task, templates: dict[str, TaskTemplate]) -> TaskTemplate | None:
    if task.template_id is None:
        return None
    try:
        return templates[task.template_id]
    except KeyError:
        raise KeyError(f"task {task.task_id}: unknown template {task.template_id!r}") from None


def make_policy(policy: str, task: Task, template: TaskTemplate | None, ep_seed: int,
                 max_steps: int, guard: SafetyGuard) -> Policy:
    if policy == "oracle":
        return OraclePolicy(template, task)
    # The walk says `done` on its last step, inside the runner's step budget.
    return RandomWalkPolicy(ep_seed, max_steps=max_steps, lang=task.language, guard=guard)


def crawl_task(env: CrawlEnv, task: Task, template: TaskTemplate | None, tid: str, *,
               policy: str, seed: int, server_url: str, store: RawStore,
               guard: SafetyGuard, audit: AuditLog, distraction_rate: float, max_steps: int,
               retries: int, stats: CrawlStats, lock, emit, verify_random_walk: bool,
               profiles: TaskProfiles) -> tuple[Trajectory, list[Step]]:
    """One task, retried from the start while the browser keeps dying."""
    ep_seed = episode_seed(seed, task.task_id)
    device, theme, font_scale = draw_device(seed, task, profiles[0], mobile=profiles[1])
    check_with = template if (policy == "oracle" or verify_random_walk) else None
    last_error = ""
    for attempt in range(retries + 1):
        info = EpisodeInfo()
        if not env.is_alive():  # died after the previous episode's last action
            env.restart()
        try:
            pol = make_policy(policy, task, template, ep_seed, max_steps, guard)
            traj, steps = run_episode(
                env, server_url=server_url, task=task, template=check_with, policy=pol,
                device=device, theme=theme, font_scale=font_scale,
                distraction_rate=distraction_rate, seed=seed, trajectory_id=tid,
                blobs=store.blobs, guard=guard, max_steps=max_steps, audit=audit,
                attempt=attempt, info=info,
                on_step=lambda s: emit("step", task, tid, step_index=s.index,
                                      action=s.action.type.value))
        except BrowserCrashed as e:
            last_error = f"BrowserCrashed: {e}"
            log.warning("task %s attempt %d: browser died (%s); restarting", task.task_id,
                        attempt, e)
            env.restart()
            if attempt < retries:
                stats.retries += 1
                emit("retry", task, tid, message=last_error)
            continue
        except Exception as e:  # a page or app bug must not stop the crawl
            log.exception("task %s attempt %d failed", task.task_id, attempt)
            last_error = f"{type(e).__name__}: {e}"
            if not env.is_alive():
                env.restart()
            if attempt < retries:  # transient page errors pass on a fresh try
                stats.retries += 1
                emit("retry", task, tid, message=last_error)
            continue
        finally:
            close_episode_quietly(env)
        stats.blocked_actions += info.blocked_actions
        stats.blocked_requests += len(info.blocked_requests)
        return traj, steps
    return error_trajectory(task, tid, policy, seed, device, env_platform(env), last_error), []


def crawl_task_pooled(pool, task: Task, template: TaskTemplate | None, tid: str, *,
                      policy: str, seed: int, server_url: str, store: RawStore,
                      guard: SafetyGuard, audit: AuditLog, distraction_rate: float,
                      max_steps: int, retries: int, stats: CrawlStats, lock, emit,
                      verify_random_walk: bool, profiles: TaskProfiles | None
                      ) -> tuple[Trajectory, list[Step]]:
    """One task on leased envs: each attempt leases, a died env means a fresh lease.

    `profiles` given (a pool of browsers, which emulate any profile): the seed
    draws the device as in a one-browser crawl, so the episode is the same
    whatever the pool's size. None (a DevicePool): the leased phone is the profile.
    """
    from .device_pool import PoolError

    ep_seed = episode_seed(seed, task.task_id)
    check_with = template if (policy == "oracle" or verify_random_walk) else None
    device = theme = font_scale = None
    if profiles is not None:
        device, theme, font_scale = draw_device(seed, task, profiles[0], mobile=profiles[1])
    platform = getattr(pool, "platform", "mobile_web")  # recorded if no lease ever succeeds
    last_error = ""
    for attempt in range(retries + 1):
        info = EpisodeInfo()
        try:
            with pool.lease() as env:
                slot = pool.slot_name(env)
                platform = env_platform(env)
                if profiles is None:
                    # The leased phone is the profile; the seed still draws theme and font.
                    spec = pool.device_of(env)
                    device, theme, font_scale = draw_device(
                        seed, task, {spec.profile.name: spec.profile}, mobile=True)
                try:
                    pol = make_policy(policy, task, template, ep_seed, max_steps, guard)
                    traj, steps = run_episode(
                        env, server_url=server_url, task=task, template=check_with,
                        policy=pol, device=device, theme=theme, font_scale=font_scale,
                        distraction_rate=distraction_rate, seed=seed, trajectory_id=tid,
                        blobs=store.blobs, guard=guard, max_steps=max_steps, audit=audit,
                        attempt=attempt, info=info,
                        on_step=lambda s: emit("step", task, tid, step_index=s.index,
                                              action=s.action.type.value, slot=slot))
                finally:
                    close_episode_quietly(env)
        except PoolError:  # no device, server or browser left: the crawl stops, not the task
            raise
        except BrowserCrashed as e:  # the pool has dropped (or will restart) that env
            last_error = f"{type(e).__name__}: {e}"
            log.warning("task %s attempt %d: session lost (%s); retrying on a fresh lease",
                        task.task_id, attempt, e)
            if attempt < retries:
                with lock:
                    stats.retries += 1
                emit("retry", task, tid, message=last_error)
            continue
        except Exception as e:  # a page or app bug must not stop the crawl
            log.exception("task %s attempt %d failed", task.task_id, attempt)
            last_error = f"{type(e).__name__}: {e}"
            if attempt < retries:
                with lock:
                    stats.retries += 1
                emit("retry", task, tid, message=last_error)
            continue
        with lock:
            stats.blocked_actions += info.blocked_actions
            stats.blocked_requests += len(info.blocked_requests)
        return traj, steps
    if device is None:  # never leased: record the pool's first phone
        first = pool.devices[0].profile
        device = draw_device(seed, task, {first.name: first}, mobile=True)[0]
    return error_trajectory(task, tid, policy, seed, device, platform, last_error), []


def error_trajectory(task: Task, tid: str, policy: str, seed: int, device: DeviceProfile,
                     platform: str, error: str) -> Trajectory:
    # Out of retries: stored as an error, with no steps,
    # so that the next crawl does not try the same broken task forever.
    return Trajectory(trajectory_id=tid, task=task, platform=platform, app=task.app,
                      device=device, source="crawl", source_name=SOURCE_NAME, policy=policy,
                      seed=seed, outcome="error", verified_by="none", num_steps=0,
                      error=error, created_at=time.time())


def close_episode_quietly(env: CrawlEnv) -> None:
    try:
        env.close_episode()
    except Exception:  # the browser may be gone; restart() already handled it
        pass
