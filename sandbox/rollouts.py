"""Rejection sampling: K agent rollouts per task, the app's state as the verifier.

Each task is played `k` times by an AgentPolicy (crawlers/agent.py) through the
crawl runner's `run_episode`, rollout i with its own seed (the model samples
with it; the device, theme and font scale are drawn from it). The runner
verifies each rollout against the task template's state predicate; successes
go to `rollouts/<model>` (SFT data), everything else to
`rollouts-failed/<model>`, so every rollout is kept and counted. The success
rate per task (`RolloutResult.rates`) feeds the curriculum. It plays live, so it
is an episode runner on the collection side (DESIGN: synthesis works on
recorded data only); the curriculum reads its rates.

Provenance: trajectories carry policy "agent" and source_name
"sandbox:agent:<model_id>". Trajectory ids are stable (task, model, seed): a
re-run skips what either collection holds and still reports the full rates.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace

from crawlers.agent import AgentPolicy, settle_unparseable
from crawlers.allowlist import Allowlist
from crawlers.crawl_episode import CrawlEnv, EpisodeContext, env_platform
from crawlers.crawl_loop import run_pooled
from crawlers.crawl_profiles import check_devices
from crawlers.crawl_tasks import (
    CrawlContext,
    CrawlJob,
    CrawlStats,
    OneEnv,
    RetryPolicy,
    close_episode_quietly,
    crawl_task,
)
from crawlers.guard import SafetyGuard
from crawlers.pool_slots import EnvPool
from crawlers.randomise import episode_seed
from crawlers.web_env import BrowserCrashed, WebEnv
from sandbox.crawl import draw_task_device
from sandbox.environment import SOURCE_NAME
from sandbox.episode import SandboxRun
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import TaskTemplate
from schemas.converters.gui_libra import Coords
from schemas.records import Step, Task, Trajectory, trajectory_id_for
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMBackend

log = logging.getLogger(__name__)

# Collections of agent rollouts: verified successes (SFT data) and the failure pool.
SUCCESS_PREFIX = "rollouts/"
FAILED_PREFIX = "rollouts-failed/"


def model_slug(model_id: str) -> str:
    """A model id made safe as one folder name."""
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", model_id).strip("_") or "model"


def agent_source_name(model_id: str) -> str:
    return f"{SOURCE_NAME}:agent:{model_id}"


def rollout_seed(seed: int, task_id: str, i: int) -> int:
    """Rollout i's seed: distinct per rollout and task, fixed by the run's seed.

    31 bits, so that every backend takes the sampling seeds derived from it.
    """
    return episode_seed(seed, f"{task_id}#rollout{i}") % 2**31


@contextmanager
def sandbox_env(
    env: CrawlEnv | None, server_url: str, extra_origins: list[str] | None = None
) -> Iterator[CrawlEnv]:
    """`env` as given, or a headless Chromium allowed to reach only the sandbox."""
    if env is not None:
        yield env
        return
    own = WebEnv.launch(headless=True, request_filter=Allowlist([server_url, *(extra_origins or [])]))
    try:
        yield own
    finally:
        own.close()


def _play_agent(
    run: SandboxRun,
    env: CrawlEnv,
    task: Task,
    policy: AgentPolicy,
    template: TaskTemplate | None,
    ctx: EpisodeContext,
) -> tuple[Trajectory, list[Step]]:
    """One attempt, with the agent's provenance (its unparseable answer settled)."""
    traj, steps = run.play(env, task, policy, ctx, template)
    traj = settle_unparseable(traj, policy)
    return traj.model_copy(update={"source_name": agent_source_name(policy.model_id)}), steps


def play_agent_episode(
    env: CrawlEnv,
    policy: AgentPolicy,
    task: Task,
    template: TaskTemplate | None,
    ctx: EpisodeContext,
    run: SandboxRun,
) -> tuple[Trajectory, list[Step]]:
    """One agent episode through the runner, retried from scratch when the browser dies.

    `ctx.device` None: drawn from `ctx.seed` as a crawl would, among the profiles
    `run.devices` names (default: all of the task's family). Out of retries, the
    env's loss is raised.
    """
    if ctx.device is None:
        ctx = replace(ctx, device=draw_task_device(task, ctx.seed, run.devices, env))
    held = {"policy": policy}
    one = OneEnv(env)

    def attempt(n: int) -> tuple[Trajectory, list[Step]]:
        if n:  # the same agent from its first step: the episode is replayed from scratch
            held["policy"] = _fresh(held["policy"])
        with one.lease() as live:
            try:
                return _play_agent(run, live, task, held["policy"], template, replace(ctx, attempt=n))
            finally:
                close_episode_quietly(live)

    retry = RetryPolicy(run.retries, fatal=(), retry_on=(BrowserCrashed,))
    played, error = retry.run(attempt, what=ctx.trajectory_id, on_retry=lambda message: None)
    if error is not None:
        raise error
    return played


def _fresh(policy: AgentPolicy) -> AgentPolicy:
    """The same agent from its first step (a retry replays the episode from scratch)."""
    return AgentPolicy(
        policy.backend,
        policy.task,
        language=policy.language,
        max_steps=policy.max_steps,
        coords=policy.coords,
        history_len=policy.history_len,
        max_new_tokens=policy.max_new_tokens,
        temperature=policy.temperature,
        seed=policy.seed,
    )


@dataclass
class RolloutResult:
    model_id: str
    collection: str  # successes
    failed_collection: str  # failures, errors, unverified
    k: int
    rates: dict[str, tuple[int, int]] = field(default_factory=dict)  # task_id -> (successes, k)
    written: int = 0
    skipped: int = 0  # rollouts already stored before this call
    outcomes: dict[str, int] = field(default_factory=dict)  # of the rollouts played now
    unparseable_answers: int = 0
    blocked_actions: int = 0
    retries: int = 0  # rollouts replayed whole after their env died (pool)
    steps: int = 0
    seconds: float = 0.0

    def success_rates(self) -> dict[str, float]:
        """task_id -> fraction of its k rollouts that succeeded (the curriculum's input)."""
        return {t: s / n for t, (s, n) in self.rates.items()}

    def as_dict(self) -> dict:
        d = asdict(self)
        d["rates"] = {t: list(v) for t, v in self.rates.items()}
        return d


@dataclass(frozen=True)
class Rollouts:
    """How rejection sampling plays: `k` rollouts per task of the agent at `server_url`.

    The agent samples at `temperature` (with `coords`, `history_len`,
    `max_new_tokens`); each episode has `max_steps`, the sandbox's pop-ups at
    `distraction_rate`, `retries` replays of an episode whose env died, a device
    drawn among `devices`. `templates` (default: every sandbox template) verify;
    `guard` replaces the default SafetyGuard; the collections default to
    rollouts/<model> and rollouts-failed/<model>.
    """

    server_url: str
    k: int = 8
    seed: int = 0
    max_steps: int = 15
    temperature: float = 1.0
    coords: Coords = "pixels"
    history_len: int = 8
    max_new_tokens: int = 256
    distraction_rate: float = 0.0
    retries: int = 1
    devices: list[str] | None = None
    templates: dict[str, TaskTemplate] | None = None
    guard: SafetyGuard | None = None
    collection: str | None = None
    failed_collection: str | None = None


def rejection_sample(
    tasks: Iterable[Task],
    backend: VLMBackend,
    how: Rollouts,
    *,
    store: RawStore,
    env: CrawlEnv | None = None,
    pool: EnvPool | None = None,
    on_rollout: Callable[[Trajectory], None] | None = None,
) -> RolloutResult:
    """Play each task `k` times with the agent; keep the state-verified successes.

    Every task needs a template (its state predicate is the verifier). `env`
    is used as is; without one (and without a pool), a headless Chromium
    restricted to the sandbox is launched for the call. `pool` (an EnvPool:
    WebEnvPool, RayEnvPool, DevicePool) plays up to its
    size rollouts at once, each attempt on a fresh lease: a rollout whose env died
    (a lost Ray actor too) is replayed whole on another. The rollouts are the
    sequential path's: the same ids, seeds and devices; the backend is called from
    the pool's threads (PolicyBackend serialises its calls, so each answer depends
    only on its prompt and seed). Each AgentPolicy puts its trajectory id in its
    requests' metadata ("episode"), and `on_rollout` is called on the calling thread
    as each rollout is written (in the order they end, with a pool).
    `how.devices` narrows the device profiles the rollouts draw from
    (crawlers.crawl_profiles.profiles_for). With temperature 0 a deterministic model plays
    the same episode k times: sample (the default 1.0) for useful rollouts.
    """
    k, seed, max_steps = how.k, how.seed, how.max_steps
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    if pool is not None and env is not None:
        raise ValueError("rejection_sample: give env= or pool=, not both")
    tasks = list(tasks)
    templates = TEMPLATES if how.templates is None else how.templates
    resolved = []
    for task in tasks:  # a configuration error is raised before any browser work
        template = templates.get(task.template_id) if task.template_id else None
        if template is None:
            raise ValueError(
                f"task {task.task_id}: rejection sampling needs a known template_id "
                f"(its state predicate verifies the rollouts), got {task.template_id!r}"
            )
        resolved.append(template)
    model_id = backend.model_id
    slug = model_slug(model_id)
    result = RolloutResult(
        model_id=model_id,
        collection=how.collection or f"{SUCCESS_PREFIX}{slug}",
        failed_collection=how.failed_collection or f"{FAILED_PREFIX}{slug}",
        k=k,
    )
    if result.collection == result.failed_collection:
        raise ValueError(f"collection and failed_collection are both {result.collection!r}")
    guard = how.guard or SafetyGuard()
    started = time.perf_counter()
    successes = {task.task_id: 0 for task in tasks}

    def agent(task: Task, rseed: int, tid: str) -> AgentPolicy:
        return AgentPolicy(
            backend,
            task,
            max_steps=max_steps,
            coords=how.coords,
            history_len=how.history_len,
            max_new_tokens=how.max_new_tokens,
            temperature=how.temperature,
            seed=rseed,
            episode=tid,
        )

    def record(task: Task, traj: Trajectory, steps: list[Step], unparseable: int) -> None:
        (kept if traj.outcome == "success" else failed).add(traj, steps)
        successes[task.task_id] += traj.outcome == "success"
        result.written += 1
        result.steps += len(steps)
        result.outcomes[traj.outcome] = result.outcomes.get(traj.outcome, 0) + 1
        result.unparseable_answers += unparseable
        result.blocked_actions += sum(s.guard is not None for s in steps)
        if on_rollout is not None:
            on_rollout(traj)

    with (
        store.writer(result.collection, batch_size=1) as kept,
        store.writer(result.failed_collection, batch_size=1) as failed,
        store.audit_log(result.collection) as audit,
    ):
        todo, seen = [], set()  # (task, template, seed, id) of each rollout not stored yet
        for task, template in zip(tasks, resolved):
            for i in range(k):
                rseed = rollout_seed(seed, task.task_id, i)
                tid = trajectory_id_for(SOURCE_NAME, task.task_id, "agent", model_id, rseed)
                if tid in seen:  # a task listed twice is played (and counted) once
                    continue
                seen.add(tid)
                if kept.has(tid) or failed.has(tid):
                    result.skipped += 1
                    successes[task.task_id] += kept.has(tid)
                    continue
                todo.append((task, template, rseed, tid))
        run = SandboxRun(
            server_url=how.server_url,
            store=store,
            max_steps=max_steps,
            guard=guard,
            audit=audit,
            distraction_rate=how.distraction_rate,
            devices=how.devices,
            retries=how.retries,
        )
        if pool is not None:
            result.retries += _play_pooled(pool, todo, agent, record, run, model_id)
        elif todo:
            with sandbox_env(env, how.server_url) as live:
                for task, template, rseed, tid in todo:
                    policy = agent(task, rseed, tid)
                    try:
                        traj, steps = play_agent_episode(
                            live, policy, task, template, run.episode(tid, rseed, None), run
                        )
                    except BrowserCrashed as e:  # out of retries: stored as an error, no steps
                        traj = _error_rollout(task, tid, rseed, model_id, live, how.devices, str(e))
                        steps = []
                    record(task, traj, steps, policy.stats["unparseable"])
        for task in tasks:
            result.rates[task.task_id] = (successes[task.task_id], k)
    result.seconds = round(time.perf_counter() - started, 3)
    log.info(
        "rejection sampling with %s: %d rollouts written, %d skipped, rates %s",
        model_id,
        result.written,
        result.skipped,
        result.rates,
    )
    return result


def _play_pooled(
    pool: EnvPool, todo: list[tuple], agent: Callable, record: Callable, run: SandboxRun, model_id: str
) -> int:
    """The rollouts of `todo` on the pool's envs (crawlers.crawl_tasks.crawl_task: one
    lease per attempt, a died env or lost actor means the rollout is replayed whole on a
    fresh lease); each is recorded on this thread as it ends. Returns the retries."""
    check_devices(run.devices, pool)
    # A pool of browsers emulates the profile the seed draws, as the sequential path's
    # browser does; a pool of phones (profiles set) plays on the leased phone's.
    seed_draws = pool.profiles is None
    crawl = CrawlContext(
        policy="agent",
        source_name=agent_source_name(model_id),
        retry=RetryPolicy(run.retries),
        stats=CrawlStats(),
    )

    def work(task: Task, template: TaskTemplate, rseed: int, tid: str):
        played: dict[str, AgentPolicy] = {}

        def play(env: CrawlEnv, ctx: EpisodeContext):
            policy = played["policy"] = agent(task, rseed, tid)  # each attempt from scratch
            policy.act = _noting_model_errors(policy.act, played)
            return _play_agent(run, env, task, policy, template, ctx)

        device = draw_task_device(task, rseed, run.devices) if seed_draws else None
        traj, steps = crawl_task(pool, CrawlJob(task, run.episode(tid, rseed, device), play), crawl)
        if "model_error" in played:  # the model failed, not the env: stop, as one browser does
            raise played["model_error"]
        policy = played.get("policy")
        return traj, steps, policy.stats["unparseable"] if policy is not None else 0

    run_pooled(pool, todo, work, record)
    return crawl.stats.retries


def _noting_model_errors(act: Callable, played: dict) -> Callable:
    """The policy's act, noting an exception of the model's own (the pooled crawl records any
    exception as an error episode and goes on; a rollout whose model fails must stop the run)."""

    def act_or_note(obs):
        try:
            return act(obs)
        except Exception as e:
            played["model_error"] = e
            raise

    return act_or_note


def _error_rollout(task: Task, tid: str, seed: int, model_id: str, env, devices, error: str) -> Trajectory:
    device = draw_task_device(task, seed, devices, env)
    return Trajectory(
        trajectory_id=tid,
        task=task,
        platform=env_platform(env),
        app=task.app,
        device=device,
        source="crawl",
        source_name=agent_source_name(model_id),
        policy="agent",
        seed=seed,
        outcome="error",
        verified_by="none",
        num_steps=0,
        error=f"BrowserCrashed: {error}",
        created_at=time.time(),
    )
