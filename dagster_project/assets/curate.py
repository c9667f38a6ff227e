"""curated_steps: every raw step with a verdict, a reason and its scores; kept steps scrubbed."""

import json

import dagster as dg

from dagster_project.resources import StorageResource, VLMResource
from dagster_project.schedules import AFTER_CRAWL
from filters.config import CurateConfig
from filters.pii_sources import synthetic_source_names
from filters.pipeline import curate
from trajforge.report import plots


class CurateSettings(dg.Config):
    near_duplicate_max_distance: int = -1  # -1: the calibrated default
    loop_k: int = 3
    min_steps: int = 3
    max_steps: int = 50
    drop_failed: bool = True
    ocr: str = "no_tree"  # OCR real data's screenshots: "no_tree", "always" or "never"


def synthetic_sources() -> tuple[str, ...]:
    """The sandbox, plus every environment file that declares synthetic_data: true
    (filters/pii_sources.py); their personal data is kept, the rest gets surrogates."""
    from dagster_project.assets.environments import environment_files
    from schemas.environment import EnvironmentFileError, load_environment

    envs = []
    for path in environment_files()[0].values():
        try:
            envs.append(load_environment(path))
        except EnvironmentFileError:
            continue  # changed since it was listed; its sensor reports it
    return synthetic_source_names(envs)


def curate_config(cfg: CurateSettings) -> CurateConfig:
    kw = dict(
        loop_k=cfg.loop_k,
        min_steps=cfg.min_steps,
        max_steps=cfg.max_steps,
        drop_failed=cfg.drop_failed,
        ocr=cfg.ocr,
        synthetic_sources=synthetic_sources(),
    )
    if cfg.near_duplicate_max_distance >= 0:
        kw["near_duplicate_max_distance"] = cfg.near_duplicate_max_distance
    return CurateConfig(**kw)


def curated_metadata(summary: dict) -> dict:
    dropped = summary.get("dropped", {})
    hist = {int(k): v for k, v in summary.get("neardup_histogram", {}).items()}
    meta = {
        "steps_in": summary["steps_in"],
        "steps_kept": summary["steps_kept"],
        "steps_dropped": sum(dropped.values()),
        "trajectories_in": summary.get("trajectories_in", 0),
        "trajectories_kept": summary.get("trajectories_kept", 0),
        "dropped_per_reason": dg.MetadataValue.json(dropped),
        "drops_plot": dg.MetadataValue.md(
            plots.image_md(
                plots.bar_png(dropped, f"drops per reason ({sum(dropped.values())} steps)"), "drops"
            )
        ),
        "phash_distance_histogram": dg.MetadataValue.md(
            plots.image_md(
                plots.histogram_png(
                    hist, "pHash distance to the nearest earlier same-key screen", "Hamming distance"
                ),
                "pHash distances",
            )
        ),
        "pii_scrubbed": dg.MetadataValue.json(summary.get("pii", {})),
        "pii_synthetic_kept": dg.MetadataValue.json(summary.get("pii_synthetic_kept", {})),
        "pii_ocr": dg.MetadataValue.json(summary.get("pii_ocr", {})),
        "summary": dg.MetadataValue.json(summary),
    }
    if summary.get("judge"):
        meta["judge"] = dg.MetadataValue.json(summary["judge"])
    return meta


@dg.asset(automation_condition=AFTER_CRAWL, group_name="curate", kinds={"parquet"}, deps=["raw_steps"])
def curated_steps(
    context: dg.AssetExecutionContext, config: CurateSettings, storage: StorageResource, vlm: VLMResource
) -> dg.MaterializeResult:
    """Dedup, validity and personal-data filters (and the VLM judge when a model is set).

    One row per raw step with keep/reason and every score, so thresholds can move
    without recomputing; the kept steps, scrubbed, go to the curated store the export reads.
    """
    judge = None
    backend = vlm.backend()
    if backend is not None:
        from filters.judge import Judge

        judge = Judge(backend)
    else:
        context.log.info("no VLM configured (TRAJFORGE_VLM_KIND): the judge is skipped")
    result = curate(
        storage.raw_steps_dir,
        storage.raw.blobs,
        storage.curated_dir,
        config=curate_config(config),
        judge=judge,
        progress=context.log.info,
    )
    generation = storage.publish_curated()  # with an object root; None otherwise
    summary = json.loads((storage.curated_dir / "summary.json").read_text())
    context.log.info(
        f"curated: {summary['steps_kept']} of {summary['steps_in']} steps kept; "
        f"dropped {summary.get('dropped', {})}"
    )
    where = {"url": dg.MetadataValue.url(storage.curated_url), "generation": generation} if generation else {}
    return dg.MaterializeResult(
        metadata={
            **curated_metadata(summary),
            "stage_counts": dg.MetadataValue.json(result.counts),
            "path": dg.MetadataValue.path(str(storage.curated_dir)),
            **where,
        }
    )
