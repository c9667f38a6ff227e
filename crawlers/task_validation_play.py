"""Validation's episodes: a task's demonstration or a random walk, played from a reset,
its end state judged by every task's verifier at once (crawlers/task_validation.py).

The demonstration is what the oracle plays: the environment's oracle plugin, else the
task's `params.script` (crawlers/scripted.py), else its `params.actions` replayed.
Verdicts come from the environment runtime's own verification (env_runtime.verify),
whatever the verifier kind; nothing is recorded.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from schemas.actions import ActionType
from schemas.environment import Environment, TaskSpec
from schemas.records import Task

from .env_crawl import device_for, make_env_policy, points_device
from .env_probes import StateMemo
from .env_runtime import EnvironmentRuntime, SetupError, StartPageError, VerifierError
from .env_source import close_episode_quietly
from .episode import TERMINAL, CrawlEnv, EnvEpisode, EpisodeContext
from .guard import SafetyGuard
from .policies import Policy, RandomWalkPolicy
from .pool_slots import EnvSource
from .web_env import BrowserCrashed

# Steps that are not the demonstration's actions: waits and the final done / answer.
_NOT_ACTED = {ActionType.WAIT, *TERMINAL}


def has_demonstration(environment: Environment, spec: TaskSpec) -> bool:
    return bool(environment.oracle or spec.params.get("script") or spec.params.get("actions"))


def demonstration(environment: Environment, task: Task) -> Policy:
    """What the oracle plays for `task`: plugin, else params.script, else params.actions."""
    return make_env_policy(
        "oracle", task, environment, seed=0, max_steps=environment.max_steps, guard=SafetyGuard()
    )


class EpisodeFailed(RuntimeError):
    """An episode could not be played (its start page, setup or browser), out of retries."""


class _Hashes:
    """A blob store that keeps nothing: validation records no trajectory."""

    def put(self, data: bytes, ext: str = "png") -> str:
        return hashlib.sha256(data).hexdigest()


@dataclass
class EpisodeEnd:
    """One episode: its own task's verdict at reset, the executed steps, and which of the
    judged tasks' verifiers held on its end state (or raised)."""

    true_at_reset: bool = False
    steps: int = 0
    true_for: set[str] = field(default_factory=set)
    errors: dict[str, str] = field(default_factory=dict)


class Player:
    """Plays validation episodes on a source and judges their end states."""

    def __init__(
        self, environment: Environment, source: EnvSource, runtime: EnvironmentRuntime, retries: int
    ):
        self.environment, self.source, self.runtime, self.retries = environment, source, runtime, retries
        self.episodes = 0
        self.seconds = 0.0  # spent in episodes, retries included

    @property
    def episode_s(self) -> float:
        """Seconds an episode has taken so far, on average (0 before the first)."""
        return self.seconds / self.episodes if self.episodes else 0.0

    def play(
        self,
        task: Task,
        policy: Callable[[], Policy],
        *,
        seed: int,
        label: str,
        judged: list[Task],
        own: bool = True,
    ) -> EpisodeEnd:
        """Reset to `task`'s start (seed), play `policy()`, judge each of `judged` on the end.

        `own`: the episode is `task`'s demonstration: its verifier is asked at reset (a
        true one ends the episode there) and after every step (done ends it)."""
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            tid = f"validate-{self.environment.name}-{label}-{seed}-{attempt}"
            try:
                with self.source.lease() as env:
                    started = time.perf_counter()
                    try:
                        return self._play_on(env, task, policy(), tid, seed, judged, own)
                    finally:
                        close_episode_quietly(env)
                        self.seconds += time.perf_counter() - started
            except (BrowserCrashed, StartPageError, SetupError) as e:
                last = e
        raise EpisodeFailed(f"task '{task.task_id}' ({label}, seed {seed}): {last}")

    def _device(self, env: CrawlEnv, task: Task, seed: int, own: bool):
        if self.environment.platform in ("android", "ios"):
            from .crawl_profiles import draw_device

            profile = self.source.device_of(env).profile
            return draw_device(seed, task, {profile.name: profile}, mobile=True)[0]
        pinned = points_device(self.environment, task) if own else None
        return device_for(self.environment, task, seed, profile=pinned)

    def _play_on(
        self, env: CrawlEnv, task: Task, policy: Policy, tid: str, seed: int, judged: list[Task], own: bool
    ) -> EpisodeEnd:
        self.episodes += 1
        planned = getattr(policy, "script", None) or getattr(policy, "actions", None) or []
        budget = (
            policy.max_steps
            if isinstance(policy, RandomWalkPolicy)
            else max(self.environment.max_steps, 2 * len(planned) + 2)
        )
        ctx = EpisodeContext(
            trajectory_id=tid,
            seed=seed,
            device=self._device(env, task, seed, own),
            blobs=_Hashes(),
            guard=SafetyGuard(),
            max_steps=budget,
        )
        end = EpisodeEnd()
        # The walk is not verified on the way: its end state is judged below.
        episode = EnvEpisode(env, self.runtime, task, ctx, verify=own)
        obs = episode.open()
        if own:
            end.true_at_reset = self._holds(env, task, obs, [], tid, seed, end)
            if end.true_at_reset or task.task_id in end.errors:
                return end  # trivial (or broken): its demonstration need not be played
        played = episode.play(policy)
        # Executed actions, waits aside: the demonstration's length.
        end.steps = sum(1 for s in played.steps if s.action.type not in _NOT_ACTED)
        if episode.verifier_error is not None:
            end.errors[task.task_id] = episode.verifier_error
        now = played.obs or episode.obs
        memo = StateMemo()  # every verifier judges this one end state
        for other in judged:
            if other.task_id not in end.errors and self._holds(
                env, other, now, played.steps, tid, seed, end, memo
            ):
                end.true_for.add(other.task_id)
        return end

    def _holds(
        self, env, task: Task, obs, steps, tid: str, seed: int, end: EpisodeEnd, memo: StateMemo | None = None
    ) -> bool:
        """Whether `task`'s verifier says success on the state now (an error is noted)."""
        values = self.runtime.values(task, session=tid, seed=seed)
        try:
            with _judging(env, task, values):
                verdict = self.runtime.verify(
                    env, task, obs, steps, final=True, session=tid, seed=seed, memo=memo
                )
        except VerifierError as e:
            end.errors[task.task_id] = str(e)
            return False
        return verdict is not None and verdict.success is True


@contextmanager
def _judging(env, task: Task, values: dict) -> Iterator[None]:
    """A desktop session's command verifiers read the task's params from the session's
    task (TASK_PARAM_*): judging another task's verifier on this state, it is that task."""
    if not hasattr(env, "run_command") or not hasattr(env, "task"):
        yield
        return
    saved = env.task, env.values
    env.task, env.values = task, values
    try:
        yield
    finally:
        env.task, env.values = saved
