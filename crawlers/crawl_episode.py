"""One crawl episode: a task played in an env, recorded step by step, verified by state.

`run_episode` plays one task in a WebEnv (or any env with its interface,
`CrawlEnv`): it opens the sandbox session, asks the policy for an action, lets
the safety guard judge it, executes it and records the step (the observation
*before* the action, the action, its target and whether the screen changed).
When the policy stops, the app's state decides success.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Protocol

from sandbox.server import start_url
from sandbox.tasks.base import TaskTemplate
from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory, session_seed
from trajforge.store import BlobStore

from .env_runtime import StartPageError
from .guard import AuditLog, SafetyGuard
from .policy_errors import PolicyError
from .policies import Policy

TERMINAL = {ActionType.DONE, ActionType.ANSWER, ActionType.TAKE_OVER}
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

    played = play_steps(env, obs, shot_sha, observe_ms, policy=policy,
                        trajectory_id=trajectory_id, blobs=blobs, guard=guard,
                        max_steps=max_steps, audit=audit, attempt=attempt, on_step=on_step,
                        info=info)
    steps, terminated, failure = played.steps, played.terminated, played.failure

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


@dataclass
class Played:
    """What the step loop left: the steps, whether the policy finished, why not."""

    steps: list[Step]
    terminated: bool = False
    failure: str | None = None   # why the episode ended without finishing
    stopped: bool = False        # `after_step` ended it (a verifier said done)
    obs: Observation | None = None  # the last observation (after the last action)


def play_steps(env: CrawlEnv, obs: Observation, shot_sha: str, observe_ms: float, *,
               policy: Policy, trajectory_id: str, blobs: BlobStore, guard: SafetyGuard,
               max_steps: int, audit: AuditLog | None, attempt: int,
               on_step: Callable[[Step], None] | None, info: EpisodeInfo,
               after_step: Callable[[Observation, list[Step]], bool] | None = None) -> Played:
    """Ask the policy, let the guard judge, execute, record: up to `max_steps` steps.

    Each step holds the observation *before* its action. `after_step(obs,
    steps)`, called after each executed action with the new observation, ends
    the episode when it returns True (an environment's verifier said done).
    """
    steps: list[Step] = []
    terminated = False
    failure: str | None = None  # why the episode ended without finishing
    for index in range(max_steps):
        started_at = time.time()
        try:
            action = policy.act(obs)
        except PolicyError as e:
            failure = f"{getattr(policy, 'name', 'policy')}: {e}"
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
        if after_step is not None and after_step(obs, steps):
            return Played(steps, terminated=False, failure=None, stopped=True, obs=obs)
    else:
        failure = f"max_steps={max_steps} reached without a final action"
    return Played(steps, terminated=terminated, failure=failure, obs=obs)


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
