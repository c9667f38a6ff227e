"""Goal tasks synthesised from an environment partition: `environment_goal_tasks`.

What `trajforge tasks synthesize ENV_FILE` does (crawlers/task_synthesis.py, then
trajforge/report/task_report.py), per `environment` partition
(dagster_project/assets/environments.py): explore the app, propose goals from what the
walks changed, keep the validated ones. The task file goes to
`<data>/tasks/<environment>.jsonl` (beside it its report and difficulty histogram), the
CLI's default place, so `trajforge serve ENV_FILE --tasks FILE` serves it. Two checks
read the validation's funnel: the share of played goals that were not true at reset
(non-trivial) and the share of those whose demonstration reached them (achievable).
"""

import json

import dagster as dg

from crawlers.task_synthesis import SynthesisReport, SynthesisSettings, synthesize_tasks
from crawlers.task_validation import ValidationSettings
from crawlers.task_validation_report import ValidationReport
from dagster_project.assets.environments import environment_partitions, partition_environment
from dagster_project.resources import StorageResource
from trajforge.report import plots
from trajforge.report.task_report import write_synthesis

NON_TRIVIAL = "goal_tasks_non_trivial"
ACHIEVABLE = "goal_tasks_achievable"


class GoalTasksConfig(dg.Config):
    minutes: float = 1.0  # the whole budget (exploring, then validating); small for CI
    languages: list[str] = ["en", "zh"]
    seed: int = 0
    random_tries: int = 20  # random walks per start state (no shortcut)
    # The checks' thresholds: at least this share of the played goals not true at
    # reset, and of those at least this share reached by their demonstration.
    min_non_trivial_rate: float = 0.8
    min_achievable_rate: float = 0.7


@dg.asset(
    group_name="synthesise",
    kinds={"playwright", "json"},
    partitions_def=environment_partitions,
    check_specs=[
        dg.AssetCheckSpec(
            NON_TRIVIAL,
            asset="environment_goal_tasks",
            description="At least min_non_trivial_rate of the played goals were false right after reset.",
        ),
        dg.AssetCheckSpec(
            ACHIEVABLE,
            asset="environment_goal_tasks",
            description="At least min_achievable_rate of the non-trivial goals held after their "
            "demonstration on every reset.",
        ),
    ],
)
def environment_goal_tasks(
    context: dg.AssetExecutionContext,
    config: GoalTasksConfig,
    storage: StorageResource,
):
    """Explore an environment (the partition), keep the validated goal tasks as a task file.

    Walks are recorded in the raw store's `<name>-explore` (a re-run resumes them); the
    task file is written whole.
    """
    name = context.partition_key
    path, environment = partition_environment(name)
    try:
        settings = SynthesisSettings(
            minutes=config.minutes,
            languages=tuple(config.languages),
            seed=config.seed,
            validation=ValidationSettings(random_tries=config.random_tries, seed=config.seed),
        )
        # Its own headless Chromium, allowed only the environment's origins: validation
        # leases envs from the calling thread, which a WebEnvPool refuses (its browsers
        # are bound to the pool's threads).
        report = synthesize_tasks(
            environment,
            settings,
            store=storage.raw,
            progress=lambda stage, message: context.log.debug(f"{name} [{stage}] {message}"),
        )
    except ValueError as err:  # bad settings, or an environment it cannot synthesise for
        raise dg.Failure(f"{path}: {err}") from err
    paths = write_synthesis(report, storage.path / "tasks" / f"{name}.jsonl")
    summary = report.summary()
    context.log.info(json.dumps(summary, sort_keys=True, ensure_ascii=False))
    yield dg.MaterializeResult(
        metadata=goal_metadata(report, paths),
        check_results=goal_checks(report.validation, config),
    )


def goal_metadata(report: SynthesisReport, paths: dict) -> dict:
    s = report.summary()
    return {
        "candidates": s["candidates"],
        "validated": s["validated"],
        "kept": s["kept_goals"],
        "kept_tasks": s["kept_tasks"],
        "rejected": dg.MetadataValue.json(s["rejected"]),
        "tasks_per_core_hour": s["tasks_per_core_hour"],
        "three_or_more_steps": s["three_or_more_steps"],
        "screens": s["screens"],
        "seconds": s["seconds"],
        "languages": ",".join(s["languages"]),
        "task_file": dg.MetadataValue.path(str(paths["tasks"])),
        "report": dg.MetadataValue.path(str(paths["report"])),
        "difficulty": dg.MetadataValue.md(plots.image_md(paths["difficulty"].read_bytes(), "difficulty")),
    }


def goal_checks(validation: ValidationReport | None, config: GoalTasksConfig) -> list[dg.AssetCheckResult]:
    """The non-trivial and achievable checks of a synthesis's validation (None: nothing
    was validated, both fail)."""
    rates = (
        validation.rates() if validation else {"played": 0, "non_trivial_rate": None, "achievable_rate": None}
    )
    rejected = validation.summary()["rejected"] if validation else {}
    out = []
    for check, key, least in (
        (NON_TRIVIAL, "non_trivial_rate", config.min_non_trivial_rate),
        (ACHIEVABLE, "achievable_rate", config.min_achievable_rate),
    ):
        rate = rates[key]
        out.append(
            dg.AssetCheckResult(
                check_name=check,
                passed=rate is not None and rate >= least,
                metadata={
                    "rate": -1.0 if rate is None else rate,
                    "threshold": least,
                    "played": rates["played"],
                    "rejected": dg.MetadataValue.json(rejected),
                    "problem": "no goal was played"
                    if rate is None
                    else "none"
                    if rate >= least
                    else (f"{key} {rate:.3f} < {least}"),
                },
            )
        )
    return out
