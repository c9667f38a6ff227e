"""The crawl runner: tasks in, whole verified trajectories out.

`run_episode` plays one task in a WebEnv: it opens the sandbox session, asks
the policy for an action, lets the safety guard judge it, executes it and
records the step (the observation *before* the action, the action, its
target and whether the screen changed). When the policy stops, the app's
state decides success.

`crawl` runs a list of tasks through one browser, or concurrently through a
DevicePool of Appium sessions: stable trajectory ids (a re-run resumes
without duplicates), a restart (or a fresh lease) and a retry from scratch
when the browser or session dies, and every trajectory written whole through
the store's writer. Progress goes to tqdm (on a terminal) and to an optional
callback.

Any env with the WebEnv interface works (`CrawlEnv`); the trajectory's
platform is the env's `platform` ("web" when it has none).
"""
from __future__ import annotations

import json
import logging
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from tqdm import tqdm

from sandbox.apps import MOBILE_APPS
from sandbox.server import start_url
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import OracleError, TaskTemplate
from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory, session_seed, trajectory_id_for
from trajforge.store import BlobStore, RawStore

from .allowlist import Allowlist
from .guard import AuditLog, SafetyGuard
from .policies import OraclePolicy, Policy, RandomWalkPolicy
from .randomise import (DEVICE_PROFILES, MOBILE_PROFILES, episode_seed, profile_for_task,
                        randomise)
from .web_env import BrowserCrashed, WebEnv

if TYPE_CHECKING:
    from .device_pool import DevicePool

log = logging.getLogger(__name__)

TERMINAL = {ActionType.DONE, ActionType.ANSWER, ActionType.TAKE_OVER}
POLICIES = ("oracle", "random_walk")
SOURCE_NAME = "sandbox"


class CrawlEnv(Protocol):
    """What the runner needs of an environment: WebEnv's interface (MobileEnv has it too).

    Optional: `platform` (the trajectory's platform, "web" when absent) and
    `blocked_requests` (URLs its request filter refused).
    """

    def reset(self, url: str, device: DeviceProfile | None = None) -> Observation: ...
    def step(self, action) -> Observation: ...
    def observe(self) -> Observation: ...
    def is_alive(self) -> bool: ...
    def restart(self) -> None: ...
    def close_episode(self) -> None: ...
    def close(self) -> None: ...


def env_platform(env) -> str:
    return getattr(env, "platform", None) or "web"


class StartPageError(RuntimeError):
    """The episode's start page did not load (a timeout, a refused connection)."""


# -- one episode -------------------------------------------------------------------
@dataclass
class EpisodeInfo:
    """What an episode leaves beside its records (for the crawl's statistics)."""

    blocked_actions: int = 0
    blocked_requests: list[str] = field(default_factory=list)
    answer: str | None = None


def element_at(elements: list[Element], x: float, y: float) -> Element | None:
    """The smallest element whose box contains the point (the innermost one)."""
    best, best_area = None, None
    for e in elements:
        if e.bbox is None or not e.contains(x, y):
            continue
        x0, y0, x1, y1 = e.bbox
        area = (x1 - x0) * (y1 - y0)
        if best_area is None or area < best_area:
            best, best_area = e, area
    return best


def fetch_state(server_url: str, sid: str, timeout_s: float = 10.0) -> dict:
    """The session's state from the sandbox's HTTP API (any server, any process)."""
    url = f"{server_url.rstrip('/')}/api/state/{sid}"
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read().decode("utf-8"))


def run_episode(env: CrawlEnv, *, server_url: str, task: Task, template: TaskTemplate | None,
                policy: Policy, device: DeviceProfile, theme: str, font_scale: float,
                distraction_rate: float, seed: int, trajectory_id: str, blobs: BlobStore,
                guard: SafetyGuard, max_steps: int = 30, audit: AuditLog | None = None,
                attempt: int = 0, on_step: Callable[[Step], None] | None = None,
                info: EpisodeInfo | None = None) -> tuple[Trajectory, list[Step]]:
    """Play `task` with `policy` in `env` and return the verified trajectory.

    Raises BrowserCrashed when the browser dies and StartPageError when the
    start page does not load (the caller retries either); every other
    failure ends the episode with outcome "failure".
    """
    info = info if info is not None else EpisodeInfo()
    sid = trajectory_id
    url = start_url(server_url, sid=sid, app=task.app, lang=task.language,
                    seed=session_seed(task.params, seed), theme=theme,
                    font_scale=font_scale, distraction_rate=distraction_rate)
    t0 = time.perf_counter()
    obs = env.reset(url, device=device)
    if obs.last_action_error:
        # Nothing to play on a page that never arrived (a blank screen): the
        # caller retries, then stores an error that says why.
        raise StartPageError(f"the start page did not load: {obs.last_action_error}")
    # A real phone keeps its own screen, locale and theme: record what the env ran.
    device = getattr(env, "device", None) or device
    observe_ms = (time.perf_counter() - t0) * 1000
    shot_sha = blobs.put(obs.screenshot, obs.image_format)

    steps: list[Step] = []
    terminated = False
    failure: str | None = None  # why the episode ended without finishing
    for index in range(max_steps):
        started_at = time.time()
        try:
            action = policy.act(obs)
        except OracleError as e:
            failure = f"oracle: {e}"
            break
        target = getattr(policy, "last_target", None)
        if target is None and action.x is not None:
            target = element_at(obs.elements, action.x, action.y)
        decision = guard.check(action, target, obs.elements)
        if audit is not None:
            audit.record(trajectory_id=trajectory_id, step_index=index, action=action,
                         target=target, decision=decision, attempt=attempt)
        step = Step(trajectory_id=trajectory_id, index=index, screenshot=shot_sha,
                    image_format=obs.image_format, width=obs.width, height=obs.height,
                    url=obs.url, a11y_tree=obs.a11y_tree, elements=obs.elements,
                    action=action, target=target, started_at=started_at,
                    observe_ms=round(observe_ms, 2),
                    thought=getattr(policy, "last_thought", None))  # a VLM agent's reasoning
        if not decision.allowed:
            # Not executed: the episode ends here, so no policy can loop on it.
            step.guard = decision.label()
            steps.append(step)
            info.blocked_actions += 1
            failure = f"guard {decision.label()}"
            break
        if action.type in TERMINAL:
            # Answer / done / take-over do not touch the page.
            step.screen_changed = False
            steps.append(step)
            if action.type == ActionType.ANSWER:
                info.answer = action.text
            terminated = action.type != ActionType.TAKE_OVER
            if not terminated:
                failure = f"take_over: {action.text}"
            _notify(on_step, step)
            break
        t_act = time.perf_counter()
        after = env.step(action)
        act_ms = (time.perf_counter() - t_act) * 1000
        after_sha = blobs.put(after.screenshot, after.image_format)
        step.screen_changed = after_sha != shot_sha or after.a11y_tree != obs.a11y_tree
        step.error = after.last_action_error
        # The step call also observes the result: that is the next step's observation.
        step.act_ms = round(act_ms, 2)
        steps.append(step)
        _notify(on_step, step)
        obs, shot_sha, observe_ms = after, after_sha, act_ms
    else:
        failure = f"max_steps={max_steps} reached without a final action"

    info.blocked_requests = list(getattr(env, "blocked_requests", []))
    try:
        snapshot, state_error = fetch_state(server_url, sid), None
    except (urllib.error.URLError, OSError, ValueError) as e:
        snapshot, state_error = None, f"state of session {sid} unavailable: {e}"
    outcome, verified_by, error = _verify(snapshot, state_error, task, template, terminated,
                                          failure, info.answer)
    distractions = list(snapshot.get("distractions", [])) if snapshot else []
    traj = Trajectory(trajectory_id=trajectory_id, task=task, platform=env_platform(env),
                      app=task.app, device=device, source="crawl", source_name=SOURCE_NAME,
                      policy=policy.name, seed=seed, outcome=outcome, verified_by=verified_by,
                      num_steps=len(steps), distractions=distractions, error=error,
                      created_at=time.time())
    return traj, steps


def _notify(on_step, step: Step) -> None:
    if on_step is not None:
        on_step(step)


def _verify(snapshot: dict | None, state_error: str | None, task: Task,
            template: TaskTemplate | None, terminated: bool, failure: str | None,
            answer: str | None) -> tuple[str, str, str | None]:
    """(outcome, verified_by, error): the app's state decides, never the policy."""
    if not terminated:
        return "failure", "none", failure
    if template is None:
        return "unknown", "none", None
    if snapshot is None:
        return "error", "none", state_error
    ok = template.check(task, snapshot["state"], answer)
    return ("success" if ok else "failure"), "state", None


# -- a whole crawl -------------------------------------------------------------------
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
    slot: str | None = None          # "<device>#<session>" in a pool crawl


def _template_for(task: Task, templates: dict[str, TaskTemplate]) -> TaskTemplate | None:
    if task.template_id is None:
        return None
    try:
        return templates[task.template_id]
    except KeyError:
        raise KeyError(f"task {task.task_id}: unknown template {task.template_id!r}") from None


def _make_policy(policy: str, task: Task, template: TaskTemplate | None, ep_seed: int,
                 max_steps: int, guard: SafetyGuard) -> Policy:
    if policy == "oracle":
        return OraclePolicy(template, task)
    # The walk says `done` on its last step, inside the runner's step budget.
    return RandomWalkPolicy(ep_seed, max_steps=max_steps, lang=task.language, guard=guard)


def is_mobile_task(task: Task, env: CrawlEnv | None = None) -> bool:
    """A task of a mobile app, or any task played in a mobile env."""
    return task.app in MOBILE_APPS or (env is not None and env_platform(env) != "web")


def profiles_for(task: Task, devices: list[str] | None, *, mobile: bool
                 ) -> dict[str, DeviceProfile]:
    """The device profiles a task's episode may draw (without a pool).

    Mobile tasks draw from MOBILE_PROFILES, the others from DEVICE_PROFILES;
    `devices` narrows either family to the names it lists.
    """
    family = MOBILE_PROFILES if mobile else DEVICE_PROFILES
    if devices is None:
        return family
    chosen = {name: family[name] for name in devices if name in family}
    if not chosen:
        kind = "mobile" if mobile else "web"
        raise ValueError(f"task {task.task_id}: devices={devices!r} names no {kind} profile "
                         f"(expected some of {sorted(family)})")
    return chosen


def draw_device(seed: int, task: Task, profiles: dict[str, DeviceProfile], *, mobile: bool
                ) -> tuple[DeviceProfile, str, float]:
    """(device, theme, font_scale) of a task's episode, fixed by the crawl seed.

    A mobile task gets the phone that `profile_for_task` gives it (the one the
    mobile partitions use), so its profile is the same with or without a pool;
    theme and font scale are then drawn as for any episode.
    """
    ep_seed = episode_seed(seed, task.task_id)
    if mobile:
        name = profile_for_task(seed, task.task_id, profiles)
        profiles = {name: profiles[name]}
    return randomise(ep_seed, task.language, profiles=profiles)


def _check_devices(devices: list[str] | None, pool: DevicePool | None) -> None:
    if devices is None:
        return
    known = set(DEVICE_PROFILES) | set(MOBILE_PROFILES)
    unknown = sorted(set(devices) - known)
    if unknown or not devices:
        raise ValueError(f"devices={devices!r}: expected names from {sorted(DEVICE_PROFILES)} "
                         f"(web) or {sorted(MOBILE_PROFILES)} (mobile)")
    if pool is not None:
        missing = sorted(set(pool.profiles) - set(devices))
        if missing:
            raise ValueError(f"devices={devices!r} leaves out the pool's profile(s) {missing}: "
                             "with a pool, every episode runs on the leased device's profile")


def crawl(tasks: Iterable[Task], *, store: RawStore, collection: str, server_url: str,
          policy: str = "oracle", seed: int = 0, distraction_rate: float = 0.25,
          max_steps: int = 30, retries: int = 2, env: CrawlEnv | None = None,
          progress: Callable[[ProgressEvent], None] | None = None,
          image_format: str = "png", step_timeout_s: float = 10.0,
          extra_origins: list[str] | None = None, batch_size: int = 16,
          verify_random_walk: bool = False,
          templates: dict[str, TaskTemplate] | None = None,
          devices: list[str] | None = None, guard: SafetyGuard | None = None,
          pool: DevicePool | None = None) -> CrawlStats:
    """Crawl `tasks` into `store`/`collection`; returns what happened.

    `env`, when given, is used as is (its own request filter); otherwise one
    headless Chromium is launched for the whole call, allowed to reach only
    `server_url` (and `extra_origins`). With `pool` (a DevicePool), up to
    `pool.size` episodes run at once, each on an env leased for that attempt;
    a task whose session dies is retried from scratch on a fresh lease.
    Random-walk trajectories are left unverified ("unknown") unless
    `verify_random_walk` checks them against their task's template. Templates
    are looked up in `templates` (default: every sandbox template). `guard`
    replaces the default SafetyGuard (its patterns).

    Device profiles (`draw_device`): without a pool, each episode draws its
    profile from its seed: mobile tasks (mobile apps, or any task in a mobile
    env) from MOBILE_PROFILES through `profile_for_task`, the others from
    DEVICE_PROFILES; `devices` narrows either family. With a pool, the profile
    is the leased device's, whatever the seed would draw: the mobile crawl
    partitions tasks by `profile_for_task` and hands each partition the pool
    of its profile, so both give a task the same phone. Theme and font scale
    always come from the seed; `devices`, with a pool, must include the
    pool's profiles.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}: expected one of {POLICIES}")
    if retries < 0:
        raise ValueError(f"retries={retries} must be >= 0")
    if pool is not None and env is not None:
        raise ValueError("crawl: give env= or pool=, not both")
    tasks = list(tasks)
    templates = TEMPLATES if templates is None else templates
    # A catalog that names an unknown template is a configuration error: say so
    # before any browser work rather than storing a row of errors.
    resolved = [_template_for(task, templates) for task in tasks]
    if policy == "oracle":
        for task, template in zip(tasks, resolved):
            if template is None:
                raise ValueError(f"task {task.task_id}: the oracle policy needs a template_id")
    _check_devices(devices, pool)
    # Without a pool, each task's profiles (and whether it is a mobile task).
    profiles = [None if pool is not None else
                (profiles_for(t, devices, mobile=is_mobile_task(t, env)), is_mobile_task(t, env))
                for t in tasks]
    stats = CrawlStats()
    started = time.perf_counter()
    guard = guard or SafetyGuard()
    own_env = env is None and pool is None
    if own_env:
        allow = Allowlist([server_url, *(extra_origins or [])])
        env = WebEnv.launch(headless=True, image_format=image_format,
                            step_timeout_s=step_timeout_s, request_filter=allow)
    audit = AuditLog(store.root / "audit" / f"{collection}.jsonl")
    bar = tqdm(total=len(tasks), desc=f"crawl {collection}", unit="traj",
               disable=not sys.stderr.isatty())
    # Worker threads report steps and retries while the main thread writes.
    lock = threading.RLock()
    pool_before = pool.stats() if pool is not None else None

    def emit(kind: str, task: Task, tid: str, **kw) -> None:
        with lock:
            if progress is not None:
                progress(ProgressEvent(kind=kind, task_id=task.task_id, trajectory_id=tid,
                                       stats=stats, **kw))

    def write(task: Task, traj: Trajectory, steps: list[Step]) -> None:
        with lock:
            writer.add(traj, steps)
            stats.count(traj)
            bar.update(1)
            bar.set_postfix(ok=stats.success, fail=stats.failure, err=stats.error)
        emit("trajectory", task, traj.trajectory_id, outcome=traj.outcome, message=traj.error)

    common = dict(policy=policy, seed=seed, server_url=server_url, store=store, guard=guard,
                  audit=audit, distraction_rate=distraction_rate, max_steps=max_steps,
                  retries=retries, stats=stats, lock=lock, emit=emit,
                  verify_random_walk=verify_random_walk)
    try:
        with store.writer(collection, batch_size=batch_size) as writer:
            # Claim each trajectory id once: committed ones (and repeats in the
            # list) are skipped, so no two workers ever play the same task.
            todo, claimed = [], set()
            for task, template, task_profiles in zip(tasks, resolved, profiles):
                tid = trajectory_id_for(SOURCE_NAME, task.task_id, policy, seed)
                if writer.has(tid) or tid in claimed:
                    stats.skipped += 1
                    bar.update(1)
                    emit("skip", task, tid)
                    continue
                claimed.add(tid)
                todo.append((task, template, tid, task_profiles))
            if pool is None:
                for task, template, tid, task_profiles in todo:
                    traj, steps = _crawl_task(env, task, template, tid, profiles=task_profiles,
                                              **common)
                    write(task, traj, steps)
            else:
                _crawl_concurrently(pool, todo, write, common)
    finally:
        bar.close()
        audit.close()
        if own_env:
            env.close()
        if pool is not None:
            after = pool.stats()
            stats.reconnects = after["reconnects"] - pool_before["reconnects"]
            stats.server_restarts = after["server_restarts"] - pool_before["server_restarts"]
        stats.seconds = round(time.perf_counter() - started, 3)
        stats.steps_per_s = round(stats.steps / stats.seconds, 3) if stats.seconds else 0.0
    return stats


def _crawl_concurrently(pool: DevicePool, todo: list, write, common: dict) -> None:
    """Play `todo` on `pool.size` worker threads; write each result as it comes.

    A failure that is not the task's (a PoolError: no device left, or a server
    that will not restart) stops the crawl: queued tasks are cancelled, running ones finish and are written,
    then the error is raised.
    """
    if not todo:
        return
    stop = threading.Event()

    def work(task, template, tid):
        if stop.is_set():
            return None
        return _crawl_task_pooled(pool, task, template, tid, **common)

    first_error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=min(pool.size, len(todo)),
                            thread_name_prefix="crawl") as ex:
        futures = {ex.submit(work, task, template, tid): task
                   for task, template, tid, _ in todo}
        try:
            for fut in as_completed(futures):
                try:
                    result = fut.result()
                except CancelledError:
                    continue
                except Exception as e:
                    if first_error is None:
                        first_error = e
                        stop.set()
                        for f in futures:
                            f.cancel()
                    continue
                if result is not None:
                    write(futures[fut], *result)
        finally:
            stop.set()  # on Ctrl-C too: no new episode starts
            for f in futures:
                f.cancel()
    if first_error is not None:
        raise first_error


def _crawl_task_pooled(pool: DevicePool, task: Task, template: TaskTemplate | None, tid: str, *,
                       policy: str, seed: int, server_url: str, store: RawStore,
                       guard: SafetyGuard, audit: AuditLog, distraction_rate: float,
                       max_steps: int, retries: int, stats: CrawlStats, lock, emit,
                       verify_random_walk: bool) -> tuple[Trajectory, list[Step]]:
    """One task on leased envs: each attempt leases, a died session means a fresh lease.

    The steps of a failed attempt are dropped with it, so what is returned is
    always one whole episode (or an error record with no steps).
    """
    from .device_pool import PoolError

    ep_seed = episode_seed(seed, task.task_id)
    check_with = template if (policy == "oracle" or verify_random_walk) else None
    last_error, device, platform = "", None, "mobile_web"
    for attempt in range(retries + 1):
        info = EpisodeInfo()
        try:
            with pool.lease() as env:
                spec = pool.device_of(env)
                slot = pool.slot_name(env)
                platform = env_platform(env)
                # The leased phone is the profile; the seed still draws theme and font.
                device, theme, font_scale = draw_device(
                    seed, task, {spec.profile.name: spec.profile}, mobile=True)
                try:
                    pol = _make_policy(policy, task, template, ep_seed, max_steps, guard)
                    traj, steps = run_episode(
                        env, server_url=server_url, task=task, template=check_with,
                        policy=pol, device=device, theme=theme, font_scale=font_scale,
                        distraction_rate=distraction_rate, seed=seed, trajectory_id=tid,
                        blobs=store.blobs, guard=guard, max_steps=max_steps, audit=audit,
                        attempt=attempt, info=info,
                        on_step=lambda s: emit("step", task, tid, step_index=s.index,
                                              action=s.action.type.value, slot=slot))
                finally:
                    _close_episode(env)
        except PoolError:  # no device or server left: the crawl stops, not the task
            raise
        except BrowserCrashed as e:  # the pool has dropped that session
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
    return _error_trajectory(task, tid, policy, seed, device, platform, last_error), []


def _crawl_task(env: CrawlEnv, task: Task, template: TaskTemplate | None, tid: str, *,
                policy: str, seed: int, server_url: str, store: RawStore,
                guard: SafetyGuard, audit: AuditLog, distraction_rate: float, max_steps: int,
                retries: int, stats: CrawlStats, lock, emit, verify_random_walk: bool,
                profiles: tuple[dict[str, DeviceProfile], bool]) -> tuple[Trajectory, list[Step]]:
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
            pol = _make_policy(policy, task, template, ep_seed, max_steps, guard)
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
            _close_episode(env)
        stats.blocked_actions += info.blocked_actions
        stats.blocked_requests += len(info.blocked_requests)
        return traj, steps
    return _error_trajectory(task, tid, policy, seed, device, env_platform(env), last_error), []


def _error_trajectory(task: Task, tid: str, policy: str, seed: int, device: DeviceProfile,
                      platform: str, error: str) -> Trajectory:
    # Out of retries: stored as an error, with no steps,
    # so that the next crawl does not try the same broken task forever.
    return Trajectory(trajectory_id=tid, task=task, platform=platform, app=task.app,
                      device=device, source="crawl", source_name=SOURCE_NAME, policy=policy,
                      seed=seed, outcome="error", verified_by="none", num_steps=0,
                      error=error, created_at=time.time())


def _close_episode(env: CrawlEnv) -> None:
    try:
        env.close_episode()
    except Exception:  # the browser may be gone; restart() already handled it
        pass
