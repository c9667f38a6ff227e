"""One episode in an environment of an environment file: open, step, verify, finish.

`EnvEpisode` is the episode, one piece at a time: `open` has the environment
(crawlers/env_runtime.py) open the start page and run its setup; `take` runs
one step through the shared step loop (crawl_episode.EpisodeSteps: the guard
judges, the env executes, the step is recorded) and then asks the
environment's verifier, whose `done` ends the episode at once; `finish`
decides the outcome and gives the trajectory. `run_env_episode` drives it
with a policy (every crawl); the Gym API (trajforge.envs) drives the same
pieces with its caller's actions, so both record and verify alike.

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

import time
from collections.abc import Callable

from schemas.actions import Action
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory

from .crawl_episode import (
    CrawlEnv,
    EpisodeContext,
    EpisodeSteps,
    Opened,
    Played,
    StepResult,
    env_platform,
    play_policy,
)
from .env_device import observed_device
from .env_page import web_page
from .env_runtime import EnvironmentRuntime, Verdict, VerifierError
from .policies import Policy


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
        self.loop = EpisodeSteps(self.env, opened, ctx, after_step=self._after_step)
        return obs

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
            verifier_reason=(verdict.reason if verdict is not None else None),
            distractions=list(verdict.distractions or []) if verdict is not None else [],
            created_at=time.time(),
        )
        return traj, played.steps


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
