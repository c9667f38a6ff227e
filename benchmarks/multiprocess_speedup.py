"""Two crawl partitions in one Dagster run: in-process executor vs multiprocess with 2 workers.

    .venv/bin/python benchmarks/multiprocess_speedup.py [--mode smoke|quick|full]

The run materialises two assets, each the crawl of one sandbox app's catalog tasks
(the body of `web_trajectories` for one partition: the same `sandbox.crawl.crawl`
on Chromium against the sandbox, oracle policy, no pop-ups), first with
`in_process_executor` (one after the other in the run's process), then with
`multiprocess_executor` as `dagster_project.production.production_executor()` builds it
for TRAJFORGE_EXECUTOR=multiprocess (max_concurrent=2, forkserver: each step in its
own process, with its own sandbox server and browser). Same tasks, fresh data roots,
the same persistent instance. Prints both wall times and the speed-up (in-process / multiprocess).

On a 2-core machine shared with other work the figure is a floor: both steps
compete for the same cores, and each step process pays Dagster's and
Chromium's start-up. The k8s_job_executor runs the same steps as pods.
"""

# No `from __future__ import annotations`: Dagster reads the asset's config and
# resource types from real annotations.
import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import dagster as dg  # noqa: E402

from dagster_project.resources import BrowserResource, SandboxResource, StorageResource  # noqa: E402

APPS = ("settings", "notes")
TASKS_PER_APP = {"smoke": 1, "quick": 2, "full": 4}


class CrawlSlice(dg.Config):
    tasks: int = 2  # the first N catalog tasks of the app


def _crawl_asset(app: str) -> dg.AssetsDefinition:
    @dg.asset(name=f"crawl_{app}", kinds={"playwright"})
    def _crawl(
        context: dg.AssetExecutionContext,
        config: CrawlSlice,
        storage: StorageResource,
        sandbox: SandboxResource,
        browser: BrowserResource,
    ) -> dg.MaterializeResult:
        from crawlers.allowlist import Allowlist
        from crawlers.web_env import WebEnv
        from sandbox.crawl import SandboxCrawl, crawl
        from trajforge.tasks.catalog import read_catalog

        tasks = read_catalog(storage.catalog_path, apps=[app])[: config.tasks]
        t0 = time.perf_counter()
        with WebEnv.launch(
            headless=browser.headless,
            executable_path=browser.executable_path,
            request_filter=Allowlist([sandbox.url]),
        ) as env:
            stats = crawl(
                tasks,
                SandboxCrawl(server_url=sandbox.url, distraction_rate=0.0),
                store=storage.raw,
                collection=f"web/{app}",
                env=env,
            )
        return dg.MaterializeResult(
            metadata={
                "trajectories": stats.trajectories,
                "steps": stats.steps,
                "pid": os.getpid(),
                "seconds": round(time.perf_counter() - t0, 2),
            }
        )

    return _crawl


ASSETS = [_crawl_asset(app) for app in APPS]
RESOURCES = {"storage": StorageResource(), "sandbox": SandboxResource(), "browser": BrowserResource()}


def _job(executor: dg.ExecutorDefinition) -> dg.JobDefinition:
    job = dg.define_asset_job("two_partitions", selection=[a.key for a in ASSETS], executor_def=executor)
    return dg.Definitions(assets=ASSETS, jobs=[job], resources=RESOURCES).resolve_job_def("two_partitions")


def in_process_job() -> dg.JobDefinition:
    return _job(dg.in_process_executor)


def multiprocess_job() -> dg.JobDefinition:
    # The production path: TRAJFORGE_EXECUTOR=multiprocess with 2 workers (forkserver,
    # Dagster and the crawler preloaded).
    from dagster_project.production import production_executor

    return _job(production_executor({"TRAJFORGE_EXECUTOR": "multiprocess", "TRAJFORGE_MAX_CONCURRENT": "2"}))


def _write_catalog(path: Path) -> None:
    from sandbox.tasks import build_catalog
    from trajforge.tasks.catalog import write_catalog

    write_catalog(build_catalog(1, ("en",), 0), path)


def measure(tasks_per_app: int, work: Path) -> dict:
    """Wall seconds of the same two-step run under each executor."""
    from dagster._core.definitions.reconstruct import ReconstructableJob

    catalog = work / "catalog.parquet"
    _write_catalog(catalog)
    run_config = {"ops": {a.key.path[-1]: {"config": {"tasks": tasks_per_app}} for a in ASSETS}}
    out: dict = {"tasks_per_app": tasks_per_app, "apps": list(APPS)}
    (work / "dagster_home").mkdir()
    with dg.DagsterInstance.local_temp(tempdir=str(work / "dagster_home")) as instance:
        for name, factory in (("in_process", "in_process_job"), ("multiprocess", "multiprocess_job")):
            data = work / name
            (data / "catalog").mkdir(parents=True)
            shutil.copy(catalog, data / "catalog" / "tasks.parquet")
            os.environ["TRAJFORGE_DATA"] = str(data)  # StorageResource's root, in every step process
            job = ReconstructableJob.for_file(str(Path(__file__).resolve()), factory)
            t0 = time.perf_counter()
            with dg.execute_job(job, instance=instance, run_config=run_config) as result:
                seconds = time.perf_counter() - t0
                if not result.success:
                    raise RuntimeError(f"{name} run failed")
                metas = [
                    e.event_specific_data.materialization.metadata
                    for e in result.get_asset_materialization_events()
                ]
            pids = {m["pid"].value for m in metas}
            out[f"{name}_s"] = round(seconds, 2)
            out[f"{name}_step_s"] = sorted(m["seconds"].value for m in metas)
            out[f"{name}_processes"] = len(pids)
            out[f"{name}_trajectories"] = sum(m["trajectories"].value for m in metas)
    out["speedup"] = round(out["in_process_s"] / out["multiprocess_s"], 3)
    return out


def run(mode: str = "quick"):
    from common import Row

    with tempfile.TemporaryDirectory(prefix="bench-mp-") as tmp:
        res = measure(TASKS_PER_APP[mode], Path(tmp))
    n = res["in_process_trajectories"]
    return [
        Row(
            "multiprocess_speedup",
            f"2 crawl partitions x {res['tasks_per_app']} tasks: multiprocess (2 workers) vs in-process",
            3600 / res["multiprocess_s"],
            3600 / res["in_process_s"],
            "runs/h",
            "in-process executor",
            note=f"speed-up {res['speedup']}x; {n} trajectories per run; wall "
            f"{res['in_process_s']} s vs {res['multiprocess_s']} s; steps "
            f"{res['multiprocess_step_s']} s in {res['multiprocess_processes']} processes",
            extra=res,
        )
    ]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=tuple(TASKS_PER_APP), default="quick")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-mp-") as tmp:
        res = measure(TASKS_PER_APP[args.mode], Path(tmp))
    for k, v in res.items():
        print(f"{k}: {v}")
    print(
        f"speed-up with 2 workers: {res['speedup']:.2f}x "
        f"({res['in_process_s']:.1f} s in-process / {res['multiprocess_s']:.1f} s multiprocess)"
    )
    return res


if __name__ == "__main__":
    main()
