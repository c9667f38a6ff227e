"""Every environment file in a folder as one partitioned asset: crawl, check, schedule.

`TRAJFORGE_ENVIRONMENTS` (default `environments/`) holds one YAML file per
app (docs/crawl-your-own-app.md). The sensor `environment_files_sensor`
validates them and keeps the dynamic partitions `environment` equal to their
names; a new or changed file starts a crawl of its partition. The schedule
`daily_environment_crawl` crawls every partition once a day with the day's
seed, so each day adds new trajectories. A broken file is reported by name,
file and field, and the other environments go on.
"""

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import dagster as dg

from crawlers.allowlist import Allowlist
from crawlers.crawl_driver import EnvCrawl, ProgressEvent
from crawlers.env_crawl import crawl_environment
from dagster_project.assets.crawl import CRAWL_RETRY_POLICY
from dagster_project.ray_resource import RayResource
from dagster_project.resources import BrowserResource, StorageResource, VLMResource
from filters.judge import episode_judge
from schemas.environment import Environment, EnvironmentFileError, environment_from_dict, load_environment
from schemas.records import Task
from synthesis.reverse_env import reverse_environment_tasks

environment_partitions = dg.DynamicPartitionsDefinition(name="environment")
ENVIRONMENTS_CRON = os.environ.get("TRAJFORGE_ENVIRONMENTS_CRON", "0 3 * * *")
# At most this share of a partition's episodes may end in error (a start page
# that fails, a verifier that throws) before the check fails the run.
MAX_ERROR_RATE = 0.2


def environments_dir() -> Path:
    return Path(os.environ.get("TRAJFORGE_ENVIRONMENTS", "environments")).resolve()


def environment_files(folder: "Path | None" = None) -> "tuple[dict[str, Path], list[str]]":
    """(name -> file) of the valid environment files, and one message per invalid one."""
    folder = folder or environments_dir()
    found: dict[str, Path] = {}
    problems: list[str] = []
    for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else []:
        try:
            env = load_environment(path)
        except EnvironmentFileError as err:
            problems.append(str(err))
            continue
        if env.name in found:
            problems.append(f"file {path}: name {env.name!r} is also used by {found[env.name]}")
            continue
        found[env.name] = path
    return found, problems


def partition_environment(name: str) -> tuple[Path, Environment]:
    """The environment file a partition names and its environment; a Failure naming the
    folder (and the files that did not load) when there is none."""
    files, problems = environment_files()
    if name not in files:
        raise dg.Failure(
            f"no valid environment file named {name!r} in {environments_dir()}"
            + (f"; problems: {problems}" if problems else "")
        )
    return files[name], load_environment(files[name])


def day_seed(day: dt.date) -> int:
    """The seed of a day's scheduled crawl: days since 2000-01-01, new every day."""
    return (day - dt.date(2000, 1, 1)).days


class EnvironmentCrawlConfig(dg.Config):
    policy: str = ""  # "" = a walk (frontier where explore.policy says so) if it has no tasks, else oracle
    seed: int = 0
    episodes: int = 0  # 0 = every task (or explore.episodes)
    max_steps: int = 0  # 0 = the file's max_steps / explore.max_steps
    retries: int = 2
    # Play again the tasks whose stored episode is an error (after the file was fixed);
    # a local raw store only (RawStore.uncommit).
    retry_errors: bool = False


@dg.asset(
    group_name="collect",
    kinds={"playwright", "parquet"},
    partitions_def=environment_partitions,
    retry_policy=CRAWL_RETRY_POLICY,
    check_specs=[
        dg.AssetCheckSpec(
            "verified_outcomes",
            asset="environment_trajectories",
            blocking=True,
            description="No episode is left 'unknown' although the environment file names "
            "a verifier that judges it, and errors stay under 20%.",
        ),
    ],
)
def environment_trajectories(
    context: dg.AssetExecutionContext,
    config: EnvironmentCrawlConfig,
    storage: StorageResource,
    browser: BrowserResource,
):
    """Crawl one environment file (the partition) into the raw store's `env/<name>`.

    Resumable (stable ids): a retry or a re-run with the same seed adds nothing.
    """
    name = context.partition_key
    path, environment = partition_environment(name)
    explore = environment.explore
    walk = "frontier" if explore is not None and explore.policy == "frontier" else "random_walk"
    policy = config.policy or (walk if not environment.tasks and explore else "oracle")
    unknown: list[Task] = []  # the tasks of the episodes left unknown, for the check

    def progress(ev: ProgressEvent) -> None:
        if ev.kind == "trajectory" and ev.outcome == "unknown":
            unknown.append(ev.task)
        if ev.kind in ("trajectory", "retry"):
            context.log.info(f"{name} {ev.task_id}: {ev.kind} {ev.outcome or ''} {ev.message or ''}".strip())

    # `browser.browsers` Chromiums (or `browser.ray_actors` Ray actors when a Ray address is
    # set), each allowed to reach only the environment's origins.
    with _browsers(browser, environment) as pool:
        how = EnvCrawl(
            policy=policy,
            seed=config.seed,
            episodes=config.episodes or None,
            max_steps=config.max_steps or None,
            retries=config.retries,
            retry_errors=config.retry_errors,
        )
        stats = crawl_environment(
            environment,
            how,
            store=storage.raw,
            collection=f"env/{name}",
            pool=pool,
            progress=progress,
        )
        browsers = pool.stats()
    summary = stats.summary()
    context.log.info(json.dumps(summary, sort_keys=True))
    yield dg.MaterializeResult(
        metadata={
            **{k: v for k, v in summary.items() if v is not None},
            "file": str(path),
            "policy": policy,
            "seed": config.seed,
            "browsers": dg.MetadataValue.json(browsers),
        },
        check_results=[outcome_check(environment, stats, unknown)],
    )


def _browsers(browser, environment):
    """The environment's pool: local browsers, or Ray actors when the browser resource names
    a cluster (dagster_project.ray_resource), allowed only the environment's origins."""
    return RayResource.for_browser(browser).browser_pool(browser, Allowlist(environment.origins()))


def outcome_check(environment: Environment, stats, unknown: list[Task]) -> dg.AssetCheckResult:
    """Fails when an episode was left unknown although the environment names the verifier
    that judges it (`Environment.verifier_for`, what the crawl asks too: a task's own or
    the file's; for a walk `explore.verifier`, else the file's, none after
    `verifier: null`), or when errors pile up. `unknown`: the tasks of the episodes
    this crawl recorded unknown."""
    played = stats.trajectories
    judged = [t for t in unknown if environment.verifier_for(t) is not None]
    error_rate = stats.error / played if played else 0.0
    problems = []
    if judged:
        kinds = sorted({environment.verifier_for(t).kind for t in judged})
        problems.append(
            f"{len(judged)} episode(s) unknown although a {'/'.join(kinds)} verifier judges them "
            f"(first: task {judged[0].task_id!r})"
        )
    if error_rate > MAX_ERROR_RATE:
        problems.append(f"error rate {error_rate:.0%} > {MAX_ERROR_RATE:.0%}")
    return dg.AssetCheckResult(
        check_name="verified_outcomes",
        passed=not problems,
        metadata={
            "episodes": played,
            "unknown": stats.unknown,
            "unknown_with_verifier": len(judged),
            "errors": stats.error,
            "error_rate": round(error_rate, 3),
            "problems": "; ".join(problems) or "none",
        },
    )


environment_crawl_job = dg.define_asset_job(
    "environment_crawl_job",
    selection=dg.AssetSelection.assets("environment_trajectories"),
    description="Crawl one environment file (a partition) with Playwright.",
)


def _fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@dg.sensor(
    job=environment_crawl_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED
)
def environment_files_sensor(context: dg.SensorEvaluationContext):
    """Keep the `environment` partitions equal to the folder's files; crawl new or changed ones."""
    files, problems = environment_files()
    for problem in problems:
        context.log.warning(problem)
    known = set(context.instance.get_dynamic_partitions(environment_partitions.name))
    added = sorted(set(files) - known)
    removed = sorted(known - set(files))
    requests = [
        dg.RunRequest(
            run_key=f"{name}:{_fingerprint(path)}",
            partition_key=name,
            tags={"trajforge/sensor": "environment_files_sensor"},
        )
        for name, path in sorted(files.items())
    ]
    if not files and not removed:
        return dg.SkipReason(
            f"no valid environment file in {environments_dir()}"
            + (f" ({len(problems)} invalid)" if problems else "")
        )
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[
            *([environment_partitions.build_add_request(added)] if added else []),
            *([environment_partitions.build_delete_request(removed)] if removed else []),
        ],
    )


@dg.schedule(
    job=environment_crawl_job,
    cron_schedule=ENVIRONMENTS_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
def daily_environment_crawl(context: dg.ScheduleEvaluationContext):
    """One run per environment, with the day's seed: day 2 crawls new episodes."""
    day = context.scheduled_execution_time.date()
    seed = day_seed(day)
    for name in sorted(context.instance.get_dynamic_partitions(environment_partitions.name)):
        yield dg.RunRequest(
            run_key=f"{day.isoformat()}:{name}",
            partition_key=name,
            run_config={"ops": {"environment_trajectories": {"config": {"seed": seed}}}},
            tags={"trajforge/schedule": "daily_environment_crawl"},
        )


@dg.asset(
    group_name="synthesise",
    kinds={"playwright", "json"},
    partitions_def=environment_partitions,
    deps=["environment_trajectories"],
    retry_policy=CRAWL_RETRY_POLICY,
)
def environment_reverse_tasks(
    context: dg.AssetExecutionContext, storage: StorageResource, browser: BrowserResource, vlm: VLMResource
):
    """Name an environment's exploration walks as tasks, then replay and verify them.

    The task file (data/reverse/<name>/tasks.jsonl) has the shape of an
    environment file's tasks; the replays land in `env-reverse/<name>`.
    """
    name = context.partition_key
    _, environment = partition_environment(name)
    store = storage.raw
    backend = vlm.backend()
    walks = explore_walks(store, f"env/{name}")
    made = reverse_environment_tasks(
        walks, volatile=environment.volatile, backend=backend, blobs=store.blobs, judge=backend is not None
    )
    path = made.write(storage.path / "reverse" / name / "tasks.jsonl")
    replayed = (
        environment_from_dict(
            {**environment.model_dump(exclude_none=True), "tasks": made.tasks, "explore": None},
            source=str(path),
        )
        if made.tasks
        else None
    )
    summary = {}
    if replayed is not None:
        judge = episode_judge(backend, store.blobs) if backend is not None else None
        with _browsers(browser, environment) as pool:
            stats = crawl_environment(
                replayed,
                EnvCrawl(policy="replay", judge=judge),
                store=store,
                collection=f"env-reverse/{name}",
                pool=pool,
            )
        summary = stats.summary()
    context.log.info(
        f"{name}: {made.walks} walks -> {len(made.tasks)} tasks {made.sources}; "
        f"replays {json.dumps(summary, sort_keys=True)}"
    )
    return dg.MaterializeResult(
        metadata={
            "walks": made.walks,
            "tasks": len(made.tasks),
            "task_file": str(path),
            "instruction_sources": dg.MetadataValue.json(made.sources),
            "skipped_walks": dg.MetadataValue.json(made.skipped),
            "replays_verified": summary.get("success", 0),
            "replays_failed": summary.get("failure", 0),
            "replays_error": summary.get("error", 0),
            "template_named": made.sources.get("template", 0),
        }
    )


def explore_walks(store, collection: str):
    """(trajectory, steps) of the exploration episodes recorded in `collection`."""
    walks = {t.trajectory_id: t for t in store.iter_trajectories(collection) if t.task.params.get("explore")}
    steps: dict = {}
    for s in store.iter_steps(collection):
        if s.trajectory_id in walks:
            steps.setdefault(s.trajectory_id, []).append(s)
    return [(walks[tid], steps.get(tid, [])) for tid in sorted(walks)]
