"""One episode: open it in its environment, take its steps, verify, give the trajectory.

`EnvEpisode` is the episode, one piece at a time: `open` has the environment
runtime (crawlers/env_runtime.py) reset the env to the start page and run its
setup; `take` runs one step through `EpisodeSteps` (the guard judges, the env
executes, the step is recorded, each step holding the observation *before*
its action) and then asks the environment's verifier, whose `done` ends the
episode at once; `finish` decides the outcome and gives the trajectory.
`run_env_episode` drives it with a policy (every crawl); the Gym API
(trajforge.envs) drives the same pieces with its caller's actions, so both
record and verify alike. `CrawlEnv` is what an episode needs of an env
(WebEnv's interface; MobileEnv and DesktopEnv have it too).

The outcome never says `unknown` where a verifier exists:
- the verifier said done: its success (or failure);
- the policy finished (done / answer) or `max_steps` ran out: the verifier is
  asked once more and its verdict is the outcome (no verdict is a failure);
- the guard refused an action, the policy gave up, a take-over: failure;
- the verifier raised or timed out: error, naming environment, task, verifier.
Only a task with no verifier at all, played to its end, is `unknown`.

The trajectory's device records the theme and language the start page showed
(crawlers/env_device.py), not only the ones the browser was asked to emulate.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from schemas.actions import Action, ActionType
from schemas.environment import ResetSpec
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from trajforge.store.audit import AuditLog
from trajforge.store.raw import BlobStore

from .env_device import observed_device
from .env_page import web_page
from .env_runtime import EnvironmentRuntime, Verdict, VerifierError
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
    device: DeviceProfile | None  # None until a crawl task leases a phone (crawl_driver)
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
    app_exit: int | None = None  # the exit status of an app the last action closed


@dataclass
class StepResult:
    """One step taken: its record, the screen now, whether it ran and whether it ended the episode."""

    step: Step
    obs: Observation  # after the action; the same screen when it was not executed
    executed: bool  # False: refused by the guard, or a final action (done / answer / take-over)
    ended: bool


class EpisodeSteps:
    """One episode's steps, taken one at a time: let the guard judge, execute, record.

    `play_policy` drives it with a policy; the Gym API (trajforge.envs) with its
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
        read_probes: Callable[[], dict] | None = None,
    ):
        self.env, self.ctx, self.after_step = env, ctx, after_step
        # The environment's probes, read on each screen and recorded on its step.
        self.read_probes = read_probes
        self.probes = read_probes() if read_probes is not None else None
        self.obs, self.shot_sha, self.observe_ms = opened.obs, opened.shot_sha, opened.observe_ms
        self.steps: list[Step] = []
        self.terminated = False  # the policy finished (done / answer)
        self.failure: str | None = None  # why the episode ended without finishing
        self.stopped = False  # `after_step` ended it
        self.ended = False
        self.app_exit: int | None = None  # the last action closed the app, with this status

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
            probes_json=None
            if self.probes is None
            else json.dumps(self.probes, ensure_ascii=False, default=str),
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
        if self.read_probes is not None:
            self.probes = self.read_probes()
        if self.after_step is not None and self.after_step(after, self.steps):
            self.stopped = self.ended = True
        if after.app_exit is not None:
            # The action closed the app (Quit, a dialog's Cancel): the agent ended the
            # episode, as with `done`, and the verifier judges what the app left.
            self.app_exit = after.app_exit
            self.terminated = self.ended = True
        return StepResult(step, after, executed=True, ended=self.ended)

    def played(self) -> Played:
        """What the episode left; one that has not ended ran out of steps."""
        failure = self.failure
        if not self.ended:
            failure = f"max_steps={self.ctx.max_steps} reached without a final action"
        return Played(
            self.steps,
            terminated=self.terminated,
            failure=failure,
            stopped=self.stopped,
            obs=self.obs,
            app_exit=self.app_exit,
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


def _notify(on_step, step: Step) -> None:
    if on_step is not None:
        on_step(step)


class EnvEpisode:
    """One episode of `runtime`'s environment in `env`, a step at a time.

    `open()` first (it may raise BrowserCrashed, StartPageError or SetupError:
    the caller retries), then `take(action)` until `ended` (or stop early:
    `finish` treats an episode that has not ended as out of steps), then
    `finish(policy)`. `verify=False` records the episode unverified (a walk
    whose task nobody claims). After `open`, `task` is the task as the page
    states it (an instruction read by `instruction_js`).
    """

    def __init__(
        self,
        env: CrawlEnv,
        runtime: EnvironmentRuntime,
        task: Task,
        ctx: EpisodeContext,
        *,
        verify: bool = True,
    ):
        self.env, self.runtime, self.task, self.ctx, self.verify = env, runtime, task, ctx, verify
        self.device: DeviceProfile | None = ctx.device
        self.verdict: Verdict | None = None  # the verifier's latest
        self.verifier_error: str | None = None
        self.env_error: str | None = None  # the environment failed (a crashed browser, a lost actor)
        self.platform = "web"
        self.open_ms: float | None = None  # start page, setup and first observation
        self.loop: EpisodeSteps | None = None

    # ------------------------------------------------------------------ pieces
    def open(self) -> Observation:
        """Reset the env to the task's start page, run the setup; the first observation."""
        ctx = self.ctx
        t0 = time.perf_counter()
        obs, self.task = self.runtime.start(
            self.env, self.task, session=ctx.trajectory_id, seed=ctx.seed, device=ctx.device
        )
        self.device = getattr(self.env, "device", None) or ctx.device
        self.platform = env_platform(self.env)  # read now: a failed env may not answer at the end
        page = web_page(self.env)
        if page is not None:  # record the theme and language the app showed, not the ones asked for
            self.device = observed_device(page, self.device)
        self.open_ms = (time.perf_counter() - t0) * 1000
        opened = Opened(obs, ctx.blobs.put(obs.screenshot, obs.image_format), self.open_ms)
        self.loop = EpisodeSteps(
            self.env, opened, ctx, after_step=self._after_step, read_probes=self._probes()
        )
        return obs

    def _probes(self) -> Callable[[], dict] | None:
        """An exploration walk of an environment with `probes` records their values on
        every step: the state a goal may name that the screen does not show."""
        if not (self.task.params.get("explore") and self.runtime.environment.probes):
            return None
        ctx = self.ctx
        return lambda: self.runtime.probe_values(
            self.env, self.task, session=ctx.trajectory_id, seed=ctx.seed
        )

    @property
    def obs(self) -> Observation:
        return self._loop().obs

    @property
    def steps(self) -> list[Step]:
        return self._loop().steps

    @property
    def ended(self) -> bool:
        return self._loop().ended

    def take(
        self,
        action: Action,
        *,
        target: Element | None = None,
        thought: str | None = None,
        started_at: float | None = None,
    ) -> StepResult:
        """One step (see EpisodeSteps.take); the verifier is asked after it when it ran."""
        return self._loop().take(action, target=target, thought=thought, started_at=started_at)

    def give_up(self, failure: str) -> None:
        self._loop().give_up(failure)

    def fail(self, reason: str) -> None:
        """The environment failed under the episode: it ends as `error`, never as a
        failure of the policy (and the verifier is not asked: its page is gone)."""
        self.env_error = reason
        loop = self._loop()
        if not loop.ended:
            loop.give_up(reason)

    def play(self, policy: Policy) -> Played:
        """Let `policy` play the episode to its end."""
        return play_policy(self._loop(), policy)

    def _loop(self) -> EpisodeSteps:
        if self.loop is None:
            raise RuntimeError("the episode is not open: call open() first")
        return self.loop

    def _ask(self, now: Observation, steps: list[Step], final: bool) -> Verdict | None:
        if not self.verify:
            return None
        ctx = self.ctx
        return self.runtime.verify(
            self.env, self.task, now, steps, final=final, session=ctx.trajectory_id, seed=ctx.seed
        )

    def _after_step(self, now: Observation, steps: list[Step]) -> bool:
        try:
            verdict = self._ask(now, steps, final=False)
        except VerifierError as e:
            self.verifier_error = str(e)
            return True
        if verdict is not None:
            self.verdict = verdict
        return verdict is not None and verdict.done

    # ------------------------------------------------------------------ the outcome
    def finish(
        self, policy: str, *, source: str = "crawl", source_name: str | None = None
    ) -> tuple[Trajectory, list[Step]]:
        """The verified trajectory and its steps (`policy`: the Trajectory's policy kind;
        `source` / `source_name`: its provenance, default the crawl's and the environment's)."""
        ctx, task = self.ctx, self.task
        played = self._loop().played()
        if self.env_error is None:  # a lost env (a dead actor) cannot be asked
            ctx.info.blocked_requests = list(getattr(self.env, "blocked_requests", []))
        spec = self.runtime.verifier_for(task) if self.verify else None
        outcome, error = "unknown", None
        ended_by_policy = played.terminated or (played.failure or "").startswith("max_steps=")
        failed = self.verifier_error is not None or self.env_error is not None
        if not failed and spec is not None and not played.stopped and ended_by_policy:
            # The policy stopped, or the budget ran out: ask once more, for the record.
            try:
                verdict = self._ask(played.obs or self.obs, played.steps, final=True)
                if verdict is not None:
                    self.verdict = verdict
            except VerifierError as e:
                self.verifier_error = str(e)
        verdict = self.verdict
        if self.env_error is not None:
            outcome, error = "error", self.env_error
        elif self.verifier_error is not None:
            outcome, error = "error", self.verifier_error
        elif not ended_by_policy and not played.stopped:
            outcome, error = "failure", played.failure  # guard, give-up, take-over
        elif spec is None:
            outcome = "unknown" if played.terminated else "failure"
            error = None if played.terminated else played.failure
        elif verdict is None or verdict.success is None:
            outcome = "failure"
            error = played.failure or f"the {spec.kind} verifier gave no verdict"
        else:
            outcome = "success" if verdict.success else "failure"
            if not verdict.success and not verdict.done and played.failure:
                error = played.failure
        kind = spec.kind if spec is not None else None
        verified = (
            kind is not None
            and self.env_error is None
            and self.verifier_error is None
            and verdict is not None
            and verdict.success is not None
        )
        environment = self.runtime.environment
        traj = Trajectory(
            trajectory_id=ctx.trajectory_id,
            task=task,
            platform=self.platform,
            app=task.app,
            device=self.device,
            source=source,
            source_name=source_name or environment.source,
            policy=policy,
            seed=ctx.seed,
            outcome=outcome,
            verified_by=kind if verified else "none",
            num_steps=len(played.steps),
            error=error,
            reward=verdict.reward if verified else None,
            verifier=kind,
            verifier_reason=_reason(verdict, played),
            distractions=list(verdict.distractions or []) if verdict is not None else [],
            created_at=time.time(),
        )
        return traj, played.steps


def _reason(verdict: Verdict | None, played: Played) -> str | None:
    """The verifier's reason, after how the episode ended when the app closed."""
    said = verdict.reason if verdict is not None else None
    if played.app_exit is None:
        return said
    closed = f"the app exited (status {played.app_exit}) after step {len(played.steps) - 1}"
    return f"{closed}; {said}" if said else closed


def run_env_episode(
    env: CrawlEnv,
    runtime: EnvironmentRuntime,
    task: Task,
    make_policy: Callable[[Task], Policy],
    ctx: EpisodeContext,
    verify: bool = True,
) -> tuple[Trajectory, list[Step]]:
    """Play `task` in `runtime`'s environment and return the verified trajectory.

    Raises BrowserCrashed and StartPageError (the caller retries either).
    `make_policy` builds the policy from the task as the page states it (an
    instruction read by `instruction_js`). `verify=False` records the episode
    unverified (a walk whose task nobody claims).
    """
    episode = EnvEpisode(env, runtime, task, ctx, verify=verify)
    episode.open()
    policy = make_policy(episode.task)
    episode.play(policy)
    return episode.finish(policy.name)
