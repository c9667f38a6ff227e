"""One episode in an environment of an environment file: start, play, verify.

The environment (crawlers/env_runtime.py) opens the start page and runs its
setup; the shared step loop (crawl_episode.play_steps) asks the policy, lets
the guard judge and records each step; after every executed step the
environment's verifier is asked, and a `done` ends the episode at once.

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

from schemas.observation import Observation
from schemas.records import Step, Task, Trajectory

from .crawl_episode import CrawlEnv, EpisodeContext, Opened, env_platform, play_steps
from .env_device import observed_device
from .env_page import web_page
from .env_runtime import EnvironmentRuntime, Verdict, VerifierError
from .policies import Policy


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
    session, seed = ctx.trajectory_id, ctx.seed
    t0 = time.perf_counter()
    obs, task = runtime.start(env, task, session=session, seed=seed, device=ctx.device)
    policy = make_policy(task)
    device = getattr(env, "device", None) or ctx.device
    page = web_page(env)
    if page is not None:  # record the theme and language the app showed, not the ones asked for
        device = observed_device(page, device)
    observe_ms = (time.perf_counter() - t0) * 1000
    opened = Opened(obs, ctx.blobs.put(obs.screenshot, obs.image_format), observe_ms)

    verdict: Verdict | None = None
    verifier_error: str | None = None

    def ask(now: Observation, steps: list[Step], final: bool) -> Verdict | None:
        if not verify:
            return None
        return runtime.verify(env, task, now, steps, final=final, session=session, seed=seed)

    def after_step(now: Observation, steps: list[Step]) -> bool:
        nonlocal verdict, verifier_error
        try:
            verdict = ask(now, steps, final=False)
        except VerifierError as e:
            verifier_error = str(e)
            return True
        return verdict is not None and verdict.done

    played = play_steps(env, policy, opened, ctx, after_step=after_step)
    ctx.info.blocked_requests = list(getattr(env, "blocked_requests", []))
    spec = runtime.verifier_for(task) if verify else None
    outcome, error = "unknown", None
    ended_by_policy = played.terminated or (played.failure or "").startswith("max_steps=")
    if verifier_error is None and spec is not None and not played.stopped and ended_by_policy:
        # The policy stopped, or the budget ran out: ask once more, for the record.
        try:
            verdict = ask(played.obs or obs, played.steps, final=True)
        except VerifierError as e:
            verifier_error = str(e)
    if verifier_error is not None:
        outcome, error = "error", verifier_error
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
        kind is not None and verifier_error is None and verdict is not None and verdict.success is not None
    )
    environment = runtime.environment
    traj = Trajectory(
        trajectory_id=ctx.trajectory_id,
        task=task,
        platform=env_platform(env),
        app=task.app,
        device=device,
        source="crawl",
        source_name=environment.source,
        policy=policy.name,
        seed=seed,
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
