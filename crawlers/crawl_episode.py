"""The step loop every episode shares: ask the policy, let the guard judge, execute, record.

`play_steps` plays in a WebEnv (or any env with its interface, `CrawlEnv`):
each step holds the observation *before* its action, the action, its target
and whether the screen changed. Where an episode starts and who decides its
outcome belong to its environment (env_episode.run_env_episode).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Step
from trajforge.store.audit import AuditLog
from trajforge.store.raw import BlobStore

from .guard import SafetyGuard
from .policies import Policy
from .policy_errors import PolicyError

TERMINAL = {ActionType.DONE, ActionType.ANSWER, ActionType.TAKE_OVER}


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


@dataclass(frozen=True)
class EpisodeContext:
    """What one episode is played with, beside its env, task and policy.

    `attempt` numbers the tries of one task (the audit log keeps each);
    `on_step` sees every recorded step; `info` collects the crawl's figures.
    """

    trajectory_id: str
    seed: int
    device: DeviceProfile | None  # None until a crawl task leases a phone (crawl_tasks)
    blobs: BlobStore
    guard: SafetyGuard
    max_steps: int
    audit: AuditLog | None = None
    attempt: int = 0
    on_step: Callable[[Step], None] | None = None
    info: EpisodeInfo = field(default_factory=EpisodeInfo)


@dataclass(frozen=True)
class Opened:
    """An episode's first observation, its screenshot's blob and how long it took."""

    obs: Observation
    shot_sha: str
    observe_ms: float


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


@dataclass
class Played:
    """What the step loop left: the steps, whether the policy finished, why not."""

    steps: list[Step]
    terminated: bool = False
    failure: str | None = None  # why the episode ended without finishing
    stopped: bool = False  # `after_step` ended it (a verifier said done)
    obs: Observation | None = None  # the last observation (after the last action)


def play_steps(
    env: CrawlEnv,
    policy: Policy,
    opened: Opened,
    ctx: EpisodeContext,
    after_step: Callable[[Observation, list[Step]], bool] | None = None,
) -> Played:
    """Ask the policy, let the guard judge, execute, record: up to `ctx.max_steps` steps.

    Each step holds the observation *before* its action. `after_step(obs,
    steps)`, called after each executed action with the new observation, ends
    the episode when it returns True (an environment's verifier said done).
    """
    obs, shot_sha, observe_ms = opened.obs, opened.shot_sha, opened.observe_ms
    trajectory_id, blobs, guard, audit = ctx.trajectory_id, ctx.blobs, ctx.guard, ctx.audit
    info, max_steps = ctx.info, ctx.max_steps
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
            audit.record(
                trajectory_id=trajectory_id,
                step_index=index,
                action=action,
                target=target,
                decision=decision,
                attempt=ctx.attempt,
            )
        step = Step(
            trajectory_id=trajectory_id,
            index=index,
            screenshot=shot_sha,
            image_format=obs.image_format,
            width=obs.width,
            height=obs.height,
            url=obs.url,
            a11y_tree=obs.a11y_tree,
            elements=obs.elements,
            action=action,
            target=target,
            started_at=started_at,
            observe_ms=round(observe_ms, 2),
            thought=getattr(policy, "last_thought", None),
        )  # a VLM agent's reasoning
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
            _notify(ctx.on_step, step)
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
        _notify(ctx.on_step, step)
        obs, shot_sha, observe_ms = after, after_sha, act_ms
        if after_step is not None and after_step(obs, steps):
            return Played(steps, terminated=False, failure=None, stopped=True, obs=obs)
    else:
        failure = f"max_steps={max_steps} reached without a final action"
    return Played(steps, terminated=terminated, failure=failure, obs=obs)


def _notify(on_step, step: Step) -> None:
    if on_step is not None:
        on_step(step)
