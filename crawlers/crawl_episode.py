"""The step loop every episode shares: ask the policy, let the guard judge, execute, record.

`EpisodeSteps` takes an episode's steps one at a time in a WebEnv (or any env
with its interface, `CrawlEnv`): each step holds the observation *before* its
action, the action, its target and whether the screen changed. `play_steps`
drives it with a policy (a crawl); the Gym API drives it with its caller's
actions. Where an episode starts and who decides its outcome belong to its
environment (env_episode.EnvEpisode).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from schemas.actions import Action, ActionType
from schemas.environment import ResetSpec
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Step, Task
from trajforge.store.audit import AuditLog
from trajforge.store.raw import BlobStore

from .guard import SafetyGuard
from .policies import Policy
from .policy_errors import PolicyError

TERMINAL = {ActionType.DONE, ActionType.ANSWER, ActionType.TAKE_OVER}


class CrawlEnv(Protocol):
    """What the runner needs of an environment: WebEnv's interface (MobileEnv has it too).

    Optional: `platform` (the trajectory's platform, "web" when absent) and
    `blocked_requests` (URLs its request filter refused). Every platform's env
    resets alike: `how` is the environment file's `reset` (a browser's), `task`
    and `values` fill a desktop's setup commands; an env ignores what is not its own.
    """

    def reset(
        self,
        url: str,
        device: DeviceProfile | None = None,
        *,
        how: ResetSpec | None = None,
        task: Task | None = None,
        values: dict | None = None,
    ) -> Observation: ...
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


@dataclass
class StepResult:
    """One step taken: its record, the screen now, whether it ran and whether it ended the episode."""

    step: Step
    obs: Observation  # after the action; the same screen when it was not executed
    executed: bool  # False: refused by the guard, or a final action (done / answer / take-over)
    ended: bool


class EpisodeSteps:
    """One episode's steps, taken one at a time: let the guard judge, execute, record.

    `play_steps` drives it with a policy; the Gym API (trajforge.envs) with its
    caller's actions, one `take` per `step()`. Each step holds the observation
    *before* its action. `after_step(obs, steps)`, called after each executed
    action with the new observation, ends the episode when it returns True (an
    environment's verifier said done). The episode ends at a guard refusal, a
    final action, `after_step`, or `give_up`; `played()` is what it left.
    """

    def __init__(
        self,
        env: CrawlEnv,
        opened: Opened,
        ctx: EpisodeContext,
        after_step: Callable[[Observation, list[Step]], bool] | None = None,
    ):
        self.env, self.ctx, self.after_step = env, ctx, after_step
        self.obs, self.shot_sha, self.observe_ms = opened.obs, opened.shot_sha, opened.observe_ms
        self.steps: list[Step] = []
        self.terminated = False  # the policy finished (done / answer)
        self.failure: str | None = None  # why the episode ended without finishing
        self.stopped = False  # `after_step` ended it
        self.ended = False

    @property
    def budget_left(self) -> int:
        return self.ctx.max_steps - len(self.steps)

    def give_up(self, failure: str) -> None:
        """End the episode without a final action (the policy failed)."""
        self.failure, self.ended = failure, True

    def take(
        self,
        action: Action,
        *,
        target: Element | None = None,
        thought: str | None = None,
        started_at: float | None = None,
    ) -> StepResult:
        """Judge, execute and record `action` on the current screen.

        `target`: the element acted on (default: the innermost one under the
        point); `thought`: the policy's reasoning, stored on the step;
        `started_at`: when the policy was asked (unix seconds; default now).
        """
        if self.ended:
            raise RuntimeError("the episode has ended: no more steps")
        if self.budget_left <= 0:
            raise RuntimeError(f"the episode's max_steps={self.ctx.max_steps} are used up")
        ctx, obs, index = self.ctx, self.obs, len(self.steps)
        if target is None and action.x is not None:
            target = element_at(obs.elements, action.x, action.y)
        decision = ctx.guard.check(action, target, obs.elements)
        if ctx.audit is not None:
            ctx.audit.record(
                trajectory_id=ctx.trajectory_id,
                step_index=index,
                action=action,
                target=target,
                decision=decision,
                attempt=ctx.attempt,
            )
        step = Step(
            trajectory_id=ctx.trajectory_id,
            index=index,
            screenshot=self.shot_sha,
            image_format=obs.image_format,
            width=obs.width,
            height=obs.height,
            url=obs.url,
            a11y_tree=obs.a11y_tree,
            elements=obs.elements,
            action=action,
            target=target,
            started_at=time.time() if started_at is None else started_at,
            observe_ms=round(self.observe_ms, 2),
            thought=thought,  # a VLM agent's reasoning
        )
        if not decision.allowed:
            # Not executed: the episode ends here, so no policy can loop on it.
            step.guard = decision.label()
            self.steps.append(step)
            ctx.info.blocked_actions += 1
            self.give_up(f"guard {decision.label()}")
            return StepResult(step, obs, executed=False, ended=True)
        if action.type in TERMINAL:
            # Answer / done / take-over do not touch the page.
            step.screen_changed = False
            self.steps.append(step)
            if action.type == ActionType.ANSWER:
                ctx.info.answer = action.text
            self.terminated = action.type != ActionType.TAKE_OVER
            if not self.terminated:
                self.failure = f"take_over: {action.text}"
            self.ended = True
            _notify(ctx.on_step, step)
            return StepResult(step, obs, executed=False, ended=True)
        t_act = time.perf_counter()
        after = self.env.step(action)
        act_ms = (time.perf_counter() - t_act) * 1000
        after_sha = ctx.blobs.put(after.screenshot, after.image_format)
        step.screen_changed = after_sha != self.shot_sha or after.a11y_tree != obs.a11y_tree
        step.error = after.last_action_error
        # The step call also observes the result: that is the next step's observation.
        step.act_ms = round(act_ms, 2)
        self.steps.append(step)
        _notify(ctx.on_step, step)
        self.obs, self.shot_sha, self.observe_ms = after, after_sha, act_ms
        if self.after_step is not None and self.after_step(after, self.steps):
            self.stopped = self.ended = True
        return StepResult(step, after, executed=True, ended=self.ended)

    def played(self) -> Played:
        """What the episode left; one that has not ended ran out of steps."""
        failure = self.failure
        if not self.ended:
            failure = f"max_steps={self.ctx.max_steps} reached without a final action"
        return Played(
            self.steps, terminated=self.terminated, failure=failure, stopped=self.stopped, obs=self.obs
        )


def play_policy(episode: EpisodeSteps, policy: Policy) -> Played:
    """Ask `policy` for each step of `episode` until it ends or `max_steps` run out."""
    while not episode.ended and episode.budget_left > 0:
        started_at = time.time()
        try:
            action = policy.act(episode.obs)
        except PolicyError as e:
            episode.give_up(f"{getattr(policy, 'name', 'policy')}: {e}")
            break
        episode.take(
            action,
            target=getattr(policy, "last_target", None),
            thought=getattr(policy, "last_thought", None),
            started_at=started_at,
        )
    return episode.played()


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
    return play_policy(EpisodeSteps(env, opened, ctx, after_step), policy)


def _notify(on_step, step: Step) -> None:
    if on_step is not None:
        on_step(step)
