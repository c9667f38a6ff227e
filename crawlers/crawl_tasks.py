"""One task of a crawl, retried until it yields one whole episode; the crawl's statistics.

`crawl_task` plays a task on one env (restarted when the browser dies);
`crawl_task_pooled` plays it on envs leased from a pool (a DevicePool of
Appium sessions or a WebEnvPool of browsers), one lease per attempt. What an
attempt plays is the caller's `play(env, device=, theme=, font_scale=,
attempt=, info=, on_step=)` (an environment's episode). The steps of a
failed attempt are dropped with it; out of retries, the task is stored as an
error with no steps, so the next crawl does not retry it forever.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field

from typing import Callable

from schemas.records import DeviceProfile, Step, Task, Trajectory

from .crawl_episode import CrawlEnv, EpisodeInfo, env_platform
from .crawl_profiles import draw_device
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


# One attempt of a task on an env: (trajectory, steps); raises BrowserCrashed and the like.
Play = Callable[..., tuple[Trajectory, list[Step]]]


def crawl_task(env: CrawlEnv, task: Task, tid: str, *, play: Play, policy: str, seed: int,
               retries: int, stats: CrawlStats, lock, emit, profiles: TaskProfiles,
               source_name: str) -> tuple[Trajectory, list[Step]]:
    """One task, retried from the start while the browser keeps dying."""
    device, theme, font_scale = draw_device(seed, task, profiles[0], mobile=profiles[1])
    last_error = ""
    for attempt in range(retries + 1):
        info = EpisodeInfo()
        if not env.is_alive():  # died after the previous episode's last action
            env.restart()
        try:
            traj, steps = play(env, device=device, theme=theme, font_scale=font_scale,
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
    return error_trajectory(task, tid, policy, seed, device, env_platform(env), last_error,
                            source_name), []


def crawl_task_pooled(pool, task: Task, tid: str, *, play: Play, policy: str, seed: int,
                      retries: int, stats: CrawlStats, lock, emit,
                      profiles: TaskProfiles | None, source_name: str
                      ) -> tuple[Trajectory, list[Step]]:
    """One task on leased envs: each attempt leases, a died env means a fresh lease.

    `profiles` given (a pool of browsers, which emulate any profile): the seed
    draws the device as in a one-browser crawl, so the episode is the same
    whatever the pool's size. None (a DevicePool): the leased phone is the profile.
    """
    from .device_pool import PoolError

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
                    traj, steps = play(
                        env, device=device, theme=theme, font_scale=font_scale,
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
    return error_trajectory(task, tid, policy, seed, device, platform, last_error,
                            source_name), []


def error_trajectory(task: Task, tid: str, policy: str, seed: int, device: DeviceProfile,
                     platform: str, error: str, source_name: str) -> Trajectory:
    # Out of retries: stored as an error, with no steps,
    # so that the next crawl does not try the same broken task forever.
    return Trajectory(trajectory_id=tid, task=task, platform=platform, app=task.app,
                      device=device, source="crawl", source_name=source_name, policy=policy,
                      seed=seed, outcome="error", verified_by="none", num_steps=0,
                      error=error, created_at=time.time())


def close_episode_quietly(env: CrawlEnv) -> None:
    try:
        env.close_episode()
    except Exception:  # the browser may be gone; restart() already handled it
        pass
