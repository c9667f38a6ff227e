"""Reflection episodes: a real wrong step in the sandbox, its reflection and its correction."""

import dagster as dg

from crawlers.allowlist import Allowlist
from crawlers.web_env import WebEnv
from dagster_project.resources import BrowserResource, SandboxResource, StorageResource
from sandbox.crawl import is_mobile_task
from sandbox.reflection import Reflections, reflect_tasks
from synthesis.reflection_text import reflection
from trajforge.tasks.catalog import read_catalog

COLLECTION = "reflection/sandbox"


class ReflectionConfig(dg.Config):
    max_tasks: int = 16  # web tasks, spread over the catalog (every n-th by task id)
    seed: int = 0
    wrong_at: int = 1  # the wrong tap replaces the first tap at or after this step
    max_steps: int = 30


def spread(tasks: list, n: int) -> list:
    """n tasks evenly spaced over the list sorted by task id: every app and language."""
    tasks = sorted(tasks, key=lambda t: t.task_id)
    if n >= len(tasks):
        return tasks
    return [tasks[(i * len(tasks)) // n] for i in range(n)]


@dg.asset(
    group_name="collect",
    kinds={"playwright", "parquet"},
    deps=["task_catalog"],
    retry_policy=dg.RetryPolicy(max_retries=2, delay=5),
)
def reflection_trajectories(
    context: dg.AssetExecutionContext,
    config: ReflectionConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    browser: BrowserResource,
) -> dg.MaterializeResult:
    """Web tasks played by the oracle with one plausible wrong tap really executed; the next
    step's thought is a `<reflection>` written from the screen the wrong tap produced, and its
    action is the correction (back, undo or replan). Verified by the app's state like any
    crawl; `reflection.parquet` beside the collection says whether the reflection led to
    success. raw_steps takes the collection with the crawls, so the reflections reach the
    curated steps and the reasoning set (the template CoT keeps a recorded reflection).
    Resumable: a re-run skips the trajectories already stored.
    """
    web = [t for t in read_catalog(storage.catalog_path) if not is_mobile_task(t)]
    tasks = spread(web, config.max_tasks)
    with WebEnv.launch(
        headless=browser.headless,
        executable_path=browser.executable_path,
        image_format=browser.image_format,
        step_timeout_s=browser.step_timeout_s,
        request_filter=Allowlist([sandbox.url]),
    ) as env:
        how = Reflections(
            server_url=sandbox.url,
            collection=COLLECTION,
            seed=config.seed,
            wrong_at=config.wrong_at,
            max_steps=config.max_steps,
        )
        r = reflect_tasks(tasks, reflection, how, store=storage.raw, env=env)
    for task_id, why in r.skipped:
        context.log.info(f"{task_id}: no reflection ({why})")
    for task_id, err in r.errors:
        context.log.warning(f"{task_id}: {err}")
    written = r.success + r.failure
    return dg.MaterializeResult(
        metadata={
            "tasks": len(tasks),
            "written": r.trajectories,
            "already_stored": r.existing,
            "led_to_success": r.success,
            "did_not_recover": r.failure,
            "success_rate": round(r.success / written, 3) if written else 0.0,
            "skipped": len(r.skipped),
            "errors": len(r.errors),
            "corrections": dg.MetadataValue.json(_corrections(r.rows)),
            "sidecar": dg.MetadataValue.path(str(r.sidecar)),
            "seconds": r.seconds,
        }
    )


def _corrections(rows: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows:
        out[row["correction"]] = out.get(row["correction"], 0) + 1
    return dict(sorted(out.items()))
