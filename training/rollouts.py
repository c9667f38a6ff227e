"""Rejection sampling: K rollouts per task in any environment; its verifier keeps the successes.

Each task is played `k` times by a model (a VLM backend, through
training.agent.TextAgent; each episode by training.episode.play_episode) in a
gymnasium env of trajforge.envs: a GuiEnv over an
environment file (`trajforge.envs.make`), the embedded sandbox
(`trajforge.envs.make_sandbox`), or any factory of them
(`trajforge.envs.env_factories`). The model's text answers go to `env.step`
as they are: the env parses them in its model profile, plays them on the
crawl's own episode code, and its verifier (the environment file's, the
sandbox's state check) decides each rollout. Rollout i of a task has its own
seed (the model samples with it; the env draws the theme from it).

Every rollout is recorded by the env into the raw store through one
EpisodeRecorder: verified successes go to `rollouts/<model>` (SFT data),
everything else (failures, errors, unverified) to `rollouts-failed/<model>`,
each as source "rollout", policy "agent", source name
"<environment source>:agent:<model id>". The success rate per task
(`RolloutResult.rates`: verified successes / k) feeds the curriculum
(synthesis.curriculum; training.online).

Trajectory ids are stable (environment, task, model, seed): a re-run skips what
either collection holds and still reports the full rates. An env that fails
mid-rollout (a crashed browser, a lost Ray actor) has the rollout replayed whole,
`retries` times, then recorded as an `error`; an exception of the model's stops
the run (nothing half-played is recorded). With `pool=` (trajforge.envs.browser_pool,
or any crawler pool: WebEnvPool, RayEnvPool, DevicePool) up to its size rollouts
play at once, each on a GuiEnv of its own on one of the pool's workers: the same
rollouts (ids, seeds, screens) as one after another, since the backend answers
each request from its prompt and seed alone (PolicyBackend serialises its calls).

`resolve_tasks` names tasks among the environments' tasks (task or template ids, or
the whole catalog) for rejection sampling's callers: online RL, evaluation, the flywheel.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import CancelledError, Future, as_completed, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from schemas.environment import Environment
from schemas.records import DeviceProfile, Task, Trajectory, episode_seed, trajectory_id_for
from training.agent import TextAgent
from training.episode import play_episode
from training.gui_prompt import PromptSettings
from trajforge.envs import ENV_FAILED, EpisodeRecorder, GuiEnv, PoolError, make
from trajforge.store.raw import RawStore, model_slug
from trajforge.vlm.backends import VLMBackend

log = logging.getLogger(__name__)

# Collections of agent rollouts: verified successes (SFT data) and the failure pool.
SUCCESS_PREFIX = "rollouts/"
FAILED_PREFIX = "rollouts-failed/"

# What rejection sampling plays in: a factory of gymnasium envs (called with record_to,
# policy_id, max_steps, ...: trajforge.envs.EnvFactory, functools.partial(trajforge.envs.make,
# path), ...), an environment file's path, or an Environment.
EnvSource = Callable[..., Any] | str | Path | Environment


def rollout_seed(seed: int, task_id: str, i: int) -> int:
    """Rollout i's seed: distinct per rollout and task, fixed by the run's seed.

    31 bits, so that every backend takes the sampling seeds derived from it.
    """
    return episode_seed(seed, f"{task_id}#rollout{i}") % 2**31


def rollout_id(source: str, task_id: str, model_id: str, seed: int) -> str:
    """A rollout's trajectory id: stable for (environment source, task, model, seed)."""
    return trajectory_id_for(source, task_id, "agent", model_id, seed)


@dataclass
class Rollout:
    """One rollout played now: what the env said at its end."""

    task_id: str
    index: int  # i of the task's k
    trajectory_id: str
    seed: int
    outcome: str  # the verifier's: success, failure, unknown; error when the env failed
    reward: dict | None = None  # the env's info["episode_reward_parts"] (composite reward)
    steps: int = 0  # actions the env executed (what is recorded)
    answers: int = 0  # the model's answers (a format failure executes nothing)
    format_errors: int = 0
    blocked: int = 0  # actions the safety guard refused
    attempts: int = 1  # this loop's attempts (an env that failed mid-rollout: replayed whole)
    reopened: int = 0  # extra tries the env took to open the episode (GuiEnv's own retries)
    recorded: bool = False
    reason: str | None = None


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
    retries: int = 0  # rollouts (or their opening) replayed after their env failed
    steps: int = 0
    seconds: float = 0.0
    rollouts: list[Rollout] = field(default_factory=list)  # played now, in (task, i) order

    def success_rates(self) -> dict[str, float]:
        """task_id -> fraction of its k rollouts that succeeded (the curriculum's input)."""
        return {t: s / n for t, (s, n) in self.rates.items()}

    def as_dict(self) -> dict:
        d = asdict(self)
        d["rates"] = {t: list(v) for t, v in self.rates.items()}
        return d


@dataclass(frozen=True)
class Rollouts:
    """How rejection sampling plays: `k` rollouts per task.

    The agent samples at `temperature` (with `history_len`, `max_new_tokens`); each
    episode has `max_steps` answers; `retries` replays of a rollout whose env failed;
    the collections default to rollouts/<model> and rollouts-failed/<model>. With
    temperature 0 a deterministic model plays the same episode k times: sample (the
    default 1.0) for useful rollouts.
    """

    k: int = 8
    seed: int = 0
    max_steps: int = 15
    temperature: float = 1.0
    history_len: int = 8
    max_new_tokens: int = 256
    retries: int = 1
    collection: str | None = None
    failed_collection: str | None = None


def as_factory(source: EnvSource) -> Callable[..., Any]:
    """A factory of envs: an environment file or Environment goes to trajforge.envs.make."""
    if isinstance(source, (str, Path, Environment)):
        return functools.partial(make, source)
    if not callable(source):
        raise TypeError(
            f"envs: expected an env factory, a file or an Environment, got {type(source).__name__}"
        )
    return source


def _gui(env: Any) -> GuiEnv:
    inner = getattr(env, "unwrapped", env)
    if not isinstance(inner, GuiEnv):
        raise TypeError(
            f"rejection sampling records and routes its rollouts through GuiEnvs "
            f"(trajforge.envs.make / make_sandbox), got {type(inner).__name__}"
        )
    return inner


@dataclass
class _Todo:
    task: Task
    index: int
    seed: int
    tid: str
    where: int  # the factory's index


class _Sampler:
    """One rejection_sample call: its recorder, its routing and its counts."""

    def __init__(self, backend: VLMBackend, how: Rollouts, store: RawStore, result: RolloutResult):
        self.backend, self.how, self.result = backend, how, result
        self.replaying: set[str] = set()  # rollouts with an attempt left: a lost env's not recorded
        self.dropped: set[str] = set()  # rollouts the model broke off: never recorded
        self.recorder = EpisodeRecorder(store, route=self.route, audit=result.collection)
        self.lock = threading.Lock()
        self.prompt = PromptSettings(
            prompt=getattr(backend, "prompt", None) or "agent",
            mode=getattr(backend, "set_mode", None) or "direct",
            max_steps=how.max_steps,
            history_len=how.history_len,
        )

    def route(self, traj: Trajectory) -> str | None:
        tid = traj.trajectory_id
        if tid in self.dropped:
            return None
        if tid in self.replaying and traj.outcome == "error" and ENV_FAILED in (traj.error or ""):
            return None  # the env failed under this attempt: the rollout is played again
        return self.result.collection if traj.outcome == "success" else self.result.failed_collection

    def env_kwargs(self) -> dict:
        kw = {"record_to": self.recorder, "policy_id": self.backend.model_id, "max_steps": self.how.max_steps}
        profile = getattr(self.backend, "profile", None)
        if profile is not None:  # the frame the model was trained in
            kw["profile"] = profile
        return kw

    def play(self, env: Any, item: _Todo) -> Rollout:
        """One rollout, replayed whole (up to `retries` times) when the env fails."""
        how, gui = self.how, _gui(env)
        error = None
        for attempt in range(how.retries + 1):
            last = attempt == how.retries
            (self.replaying.discard if last else self.replaying.add)(item.tid)
            agent = TextAgent(
                self.backend,
                self.prompt,
                sampling=(how.max_new_tokens, how.temperature, item.seed),
                episode=item.tid,
            )
            try:
                played = self._attempt(env, agent, item)
            except _EnvFailed as e:
                error = e.cause
                log.warning("rollout %s (attempt %d) lost its env: %s", item.tid, attempt + 1, error)
                continue
            finally:
                self.replaying.discard(item.tid)
            played.attempts = attempt + 1
            return played
        # Out of attempts: the env recorded the episode it had open as an error; a rollout
        # whose episode never opened is recorded here, without steps.
        rollout = Rollout(
            item.task.task_id,
            item.index,
            item.tid,
            item.seed,
            "error",
            attempts=how.retries + 1,
            reason=f"{type(error).__name__}: {error}",
        )
        where = self.recorder.has(item.tid, (self.result.collection, self.result.failed_collection))
        rollout.recorded = where is not None or self.recorder.add(
            self._error_trajectory(gui, item, error), []
        )
        return rollout

    def _attempt(self, env: Any, agent: TextAgent, item: _Todo) -> Rollout:
        def answer(obs: dict, info: dict) -> str:
            try:
                return agent(obs, info)  # an exception here is the model's: it stops the run
            except BaseException:
                self.dropped.add(item.tid)  # a broken-off rollout is not recorded: a re-run plays it
                raise

        played = play_episode(
            env, answer, seed=item.seed, options={"task_id": item.task.task_id, "trajectory_id": item.tid}
        )
        if played.failed_at == "reset" and isinstance(played.exception, PoolError):
            raise played.exception  # no env to be had (every device quarantined, a closed pool): stop
        if played.env_failed:
            raise _EnvFailed(played.exception)
        if played.policy_failed:
            raise played.exception
        return Rollout(
            item.task.task_id,
            item.index,
            item.tid,
            item.seed,
            played.outcome or "unknown",
            reward=played.reward_parts,
            steps=played.executed,
            answers=len(played.answers),
            format_errors=played.format_failures,
            blocked=played.blocked,
            reopened=played.reopened,
            recorded=played.recorded,
            reason=played.reason or played.episode_error,
        )

    def _error_trajectory(self, gui: GuiEnv, item: _Todo, error: BaseException | None) -> Trajectory:
        width, height = gui.screen_size
        environment = gui.environment
        return Trajectory(
            trajectory_id=item.tid,
            task=item.task,
            platform=environment.platform,
            app=item.task.app,
            device=DeviceProfile(
                name=f"{environment.name}-screen", viewport_width=width, viewport_height=height
            ),
            source="rollout",
            source_name=f"{environment.source}:agent:{self.backend.model_id}",
            policy="agent",
            seed=item.seed,
            outcome="error",
            verified_by="none",
            num_steps=0,
            error=f"{type(error).__name__}: {error}"[:2000] if error is not None else "the env failed",
            created_at=time.time(),
        )

    def count(self, rollout: Rollout) -> None:
        r = self.result
        with self.lock:
            r.rollouts.append(rollout)
            r.written += rollout.recorded
            r.steps += rollout.steps
            r.outcomes[rollout.outcome] = r.outcomes.get(rollout.outcome, 0) + 1
            r.unparseable_answers += rollout.format_errors
            r.blocked_actions += rollout.blocked
            r.retries += rollout.attempts - 1 + rollout.reopened


class _EnvFailed(Exception):
    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


def rejection_sample(
    tasks: Iterable[str | Task] | None,
    backend: VLMBackend,
    how: Rollouts,
    *,
    envs: EnvSource | Sequence[EnvSource],
    store: RawStore,
    pool: Any = None,
) -> RolloutResult:
    """Play each task `k` times with the model; keep the verified successes (module docstring).

    `tasks`: task ids (or Tasks) of the envs' tasks, None for all of them; each must
    have a verifier. `envs`: one env source or several (their task ids must differ).
    Without `pool`, one env per source plays its rollouts in turn (a headless Chromium
    it launches, or the `env=` its factory holds); with `pool`, each rollout plays on
    its own env leasing from the pool, up to the pool's size at once.
    """
    k = how.k
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    factories = [as_factory(e) for e in (envs if isinstance(envs, (list, tuple)) else [envs])]
    if not factories:
        raise ValueError("rejection_sample: no environment given (envs=)")
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
    sampler = _Sampler(backend, how, store, result)
    started = time.perf_counter()
    made: list[Any] = []
    try:
        asked = None if tasks is None else [t.task_id if isinstance(t, Task) else str(t) for t in tasks]
        # One env per factory that may hold a task asked for (nothing launches before a reset).
        made = [f(**sampler.env_kwargs()) if _may_hold(f, asked) else None for f in factories]
        wanted = _resolve(asked, [(n, _gui(e)) for n, e in enumerate(made) if e is not None])
        successes = {task.task_id: 0 for task, _ in wanted}
        todo, seen = [], set()
        kept_or_failed = (result.collection, result.failed_collection)
        for task, where in wanted:
            source = _gui(made[where]).environment.source
            for i in range(k):
                rseed = rollout_seed(how.seed, task.task_id, i)
                tid = rollout_id(source, task.task_id, model_id, rseed)
                if tid in seen:  # a task listed twice is played (and counted) once
                    continue
                seen.add(tid)
                stored = sampler.recorder.has(tid, kept_or_failed)
                if stored is not None:
                    result.skipped += 1
                    successes[task.task_id] += stored == result.collection
                    continue
                todo.append(_Todo(task, i, rseed, tid, where))
        if pool is not None:
            for env in made:  # the pooled path plays on envs of its own
                if env is not None:
                    env.close()
            made = []
            _play_pooled(pool, todo, factories, sampler)
        else:
            for where, env in enumerate(made):
                if env is None:
                    continue
                for item in (t for t in todo if t.where == where):
                    sampler.count(sampler.play(env, item))
                env.close()  # its episode's browser context closed before the next env plays
        order = {t.tid: n for n, t in enumerate(todo)}
        result.rollouts.sort(key=lambda r: order[r.trajectory_id])
        for r in result.rollouts:
            successes[r.task_id] += r.outcome == "success"
        result.rates = {task.task_id: (successes[task.task_id], k) for task, _ in wanted}
    finally:
        for env in made:
            if env is not None:
                env.close()
        sampler.recorder.close()
    result.seconds = round(time.perf_counter() - started, 3)
    log.info(
        "rejection sampling with %s: %d rollouts written, %d skipped, rates %s",
        model_id,
        result.written,
        result.skipped,
        result.rates,
    )
    return result


def resolve_tasks(spec: str | Sequence[str | Task], available: Sequence[Task]) -> list[Task]:
    """The tasks of `available` that `spec` names: "catalog" (all), or task ids, template ids
    (every task of the template) or Tasks (by id), in the order named. A name that matches
    nothing is an error naming it."""
    if isinstance(spec, str):
        if spec == "catalog":
            if not available:
                raise ValueError("tasks: the environments have no task")
            return list(available)
        spec = [spec]
    out: list[Task] = []
    for name in spec:
        key = name.task_id if isinstance(name, Task) else str(name)
        found = [t for t in available if key in (t.task_id, t.template_id)]
        if not found:
            raise ValueError(f"tasks: unknown task or template id {key!r}")
        out += [t for t in found if t not in out]
    return out


def _may_hold(factory: Callable, asked: list[str] | None) -> bool:
    """False for a factory that lists its tasks (an EnvFactory) and none of them is asked for."""
    listed = getattr(factory, "tasks", None)
    return asked is None or listed is None or any(t.task_id in asked for t in listed)


def _resolve(asked: list[str] | None, envs: list[tuple[int, GuiEnv]]) -> list[tuple[Task, int]]:
    """(task, index of the env that has it) for each task id asked for, in order (None: every
    task of every env); each known to exactly one env and verified there. A configuration
    error is raised here, before any browser work."""
    index: dict[str, list[tuple[Task, int]]] = {}
    for n, env in envs:
        for t in env.tasks:
            index.setdefault(t.task_id, []).append((t, n))
    by_index = dict(envs)
    names = sorted({e.environment.name for _, e in envs})
    out = []
    for task_id in list(index) if asked is None else asked:
        found = index.get(task_id, [])
        if not found:
            raise ValueError(f"task {task_id!r}: no task of that id in the environments {names}")
        if len(found) > 1:
            raise ValueError(f"task {task_id!r}: several environments have a task of that id ({names})")
        task, n = found[0]
        if by_index[n].runtime.verifier_for(task) is None:
            raise ValueError(
                f"task {task_id} of environment '{by_index[n].environment.name}' has no verifier: "
                f"rejection sampling keeps only verified successes"
            )
        out.append((task, n))
    return out


def _play_pooled(pool: Any, todo: list[_Todo], factories: list[Callable], sampler: _Sampler) -> None:
    """Each rollout on a GuiEnv of its own that leases from `pool`, on the pool's worker
    (where its lease works); counted on this thread as each ends. The first exception (a
    model's) cancels what is queued, lets the running ones end, then is raised."""
    if not todo:
        return
    stop = threading.Event()

    def work(item: _Todo) -> Rollout | None:
        if stop.is_set():
            return None
        env = factories[item.where](pool=pool, env=None, **sampler.env_kwargs())
        try:
            return sampler.play(env, item)
        finally:
            env.close()

    futures: dict[Future, _Todo] = {pool.submit(work, item): item for item in todo}
    first_error: BaseException | None = None
    try:
        for fut in as_completed(futures):
            try:
                rollout = fut.result()
            except CancelledError:
                continue
            except Exception as e:  # noqa: BLE001 - raised once the running ones have ended
                if first_error is None:
                    first_error = e
                    stop.set()
                    for f in futures:
                        f.cancel()
                continue
            if rollout is not None:
                sampler.count(rollout)
    finally:
        stop.set()
        for f in futures:
            f.cancel()
        wait(futures)
    if first_error is not None:
        raise first_error
