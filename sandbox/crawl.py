"""The sandbox's crawl: catalog tasks in, whole verified trajectories out.

`crawl` runs a list of sandbox tasks through one browser, or concurrently
through a pool: a WebEnvPool of browsers (one WebEnv per worker thread) or a
DevicePool of Appium sessions. Each episode is the sandbox environment's
(sandbox/episode.py, on crawlers.episode), the attempts and retries are
crawlers.crawl_driver's, stable trajectory ids (a re-run resumes without
duplicates), every trajectory written whole through the store's writer.
Progress goes to tqdm (on a terminal) and to an optional callback.

`draw_task_device` is the device a sandbox task's episode draws from the seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from crawlers.crawl_driver import (
    CrawlRun,
    CrawlStats,
    EnvCrawl,
    ProgressEvent,
    RetryPolicy,
    run_crawl,
)
from crawlers.crawl_profiles import check_devices, draw_device, profiles_for
from crawlers.crawl_profiles import is_mobile_task as _is_mobile_task
from crawlers.env_source import open_env_source
from crawlers.episode import CrawlEnv, EpisodeContext
from crawlers.guard import SafetyGuard
from crawlers.policies import RandomWalkPolicy
from crawlers.pool_slots import EnvPool
from crawlers.randomise import episode_seed
from sandbox.apps import MOBILE_APPS
from sandbox.environment import SOURCE_NAME, sandbox_environment
from sandbox.episode import run_episode
from sandbox.oracle_policy import OraclePolicy
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import TaskTemplate
from schemas.records import DeviceProfile, Task
from trajforge.store.raw import RawStore

POLICIES = ("oracle", "random_walk")


def is_mobile_task(task: Task, env: CrawlEnv | None = None) -> bool:
    """A task of a sandbox phone app, or any task played in a mobile env."""
    return _is_mobile_task(task, env, MOBILE_APPS)


def template_for(task: Task, templates: dict[str, TaskTemplate]) -> TaskTemplate | None:
    if task.template_id is None:
        return None
    try:
        return templates[task.template_id]
    except KeyError:
        raise KeyError(f"task {task.task_id}: unknown template {task.template_id!r}") from None


def draw_task_device(
    task: Task, seed: int, devices: list[str] | None = None, env: CrawlEnv | None = None
) -> DeviceProfile:
    """The device a task's episode draws from `seed` (a mobile task: the phone its
    partition plays it on), among the profiles `devices` names."""
    mobile = is_mobile_task(task, env)
    return draw_device(seed, task, profiles_for(task, devices, mobile=mobile), mobile=mobile)[0]


@dataclass(frozen=True)
class SandboxCrawl:
    """How the sandbox at `server_url` is crawled: policy, seed, pop-ups, budget, retries.

    `image_format`, `step_timeout_s` and `extra_origins` configure the crawl's
    own browser (launched when no env or pool is given); `batch_size` is the
    writer's. Random-walk trajectories are left unverified ("unknown") unless
    `verify_random_walk` checks them against their task's template. Templates
    are looked up in `templates` (default: every sandbox template); `devices`
    narrows the device profiles; `guard` replaces the default SafetyGuard.
    """

    server_url: str
    policy: str = "oracle"
    seed: int = 0
    distraction_rate: float = 0.25
    max_steps: int = 30
    retries: int = 2
    image_format: str = "png"
    step_timeout_s: float = 10.0
    extra_origins: list[str] | None = None
    batch_size: int = 16
    verify_random_walk: bool = False
    templates: dict[str, TaskTemplate] | None = None
    devices: list[str] | None = None
    guard: SafetyGuard | None = None


def crawl(
    tasks: Iterable[Task],
    how: SandboxCrawl,
    *,
    store: RawStore,
    collection: str,
    env: CrawlEnv | None = None,
    pool: EnvPool | None = None,
    progress: Callable[[ProgressEvent], None] | None = None,
) -> CrawlStats:
    """Crawl `tasks` into `store`/`collection` as `how` says; returns what happened.

    `env`, when given, is used as is (its own request filter); otherwise one
    headless Chromium is launched for the whole call, allowed to reach only
    the sandbox (and `how.extra_origins`). With `pool` (a WebEnvPool of browsers or a DevicePool of
    Appium sessions, each configured by its owner), up to `pool.size` episodes
    run at once, each on an env leased for that attempt; a task whose browser
    or session dies is retried from scratch on a fresh lease (a restarted
    browser). The trajectories do not depend on the pool's size.

    Device profiles (`draw_device`): without a pool, and with a WebEnvPool
    (a browser emulates any profile), each episode draws its profile from its
    seed: mobile tasks (mobile apps, or any task in a mobile env) from
    MOBILE_PROFILES through `profile_for_task`, the others from
    DEVICE_PROFILES; `devices` narrows either family. With a DevicePool, the
    profile is the leased device's, whatever the seed would draw: the mobile crawl
    partitions tasks by `profile_for_task` and hands each partition the pool
    of its profile, so both give a task the same phone. Theme and font scale
    always come from the seed; `devices`, with a DevicePool, must include the
    pool's profiles.
    """
    policy, seed, max_steps, devices = how.policy, how.seed, how.max_steps, how.devices
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}: expected one of {POLICIES}")
    if how.retries < 0:
        raise ValueError(f"retries={how.retries} must be >= 0")
    if pool is not None and env is not None:
        raise ValueError("crawl: give env= or pool=, not both")
    tasks = list(tasks)
    templates = TEMPLATES if how.templates is None else how.templates
    # A catalog that names an unknown template is a configuration error: say so
    # before any browser work rather than storing a row of errors.
    resolved = [template_for(task, templates) for task in tasks]
    if policy == "oracle":
        for task, template in zip(tasks, resolved):
            if template is None:
                raise ValueError(f"task {task.task_id}: the oracle policy needs a template_id")
    check_devices(devices, pool)
    # Each task's device, drawn from the seed, unless a DevicePool's leased phone decides.
    seed_draws = pool is None or pool.profiles is None
    drawn = {t.task_id: draw_task_device(t, seed, devices, env) if seed_draws else None for t in tasks}
    guard = how.guard or SafetyGuard()
    stats = CrawlStats()
    check = policy == "oracle" or how.verify_random_walk

    def play(task: Task, env: CrawlEnv, ctx: EpisodeContext):
        """One attempt: the policy made fresh, the sandbox episode played."""
        template = template_for(task, templates)
        pol = (
            OraclePolicy(template, task)
            if policy == "oracle"
            # The walk says `done` on its last step, inside the runner's step budget.
            else RandomWalkPolicy(
                episode_seed(seed, task.task_id), max_steps=max_steps, lang=task.language, guard=guard
            )
        )
        return run_episode(
            env,
            task,
            pol,
            ctx,
            server_url=how.server_url,
            distraction_rate=how.distraction_rate,
            template=template if check else None,
        )

    def episode_for(task: Task, tid: str) -> EpisodeContext:
        return EpisodeContext(
            trajectory_id=tid,
            seed=seed,
            device=drawn[task.task_id],
            blobs=store.blobs,
            guard=guard,
            max_steps=max_steps,
        )

    # The crawl's own browser (or the env given) records "BrowserCrashed" for any loss.
    crawl_run = CrawlRun(
        config=EnvCrawl(
            policy=policy,
            seed=seed,
            max_steps=max_steps,
            retries=how.retries,
            guard=guard,
            image_format=how.image_format,
            step_timeout_s=how.step_timeout_s,
            batch_size=how.batch_size,
        ),
        store=store,
        collection=collection,
        source_name=SOURCE_NAME,
        retry=RetryPolicy(how.retries, crash_name=None if pool is not None else "BrowserCrashed"),
        play=play,
        stats=stats,
        progress=progress,
    )
    with open_env_source(
        sandbox_environment(how.server_url, how.distraction_rate),
        env=env,
        pool=pool,
        image_format=how.image_format,
        step_timeout_s=how.step_timeout_s,
        extra_origins=how.extra_origins or (),
    ) as source:
        run_crawl(crawl_run, tasks, episode_for, source)
    return stats
