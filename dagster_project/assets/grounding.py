"""grounding_set: element grounding samples from every curated screen, with blocking checks."""

import dagster as dg

from dagster_project.resources import StorageResource, VLMResource
from dagster_project.schedules import AFTER_CRAWL
from schemas.model_profiles import DEFAULT_PROFILE
from synthesis.grounding_checks import grounding_checks
from synthesis.grounding_samples import vlm_describer
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import SetOptions
from trajforge.report import plots

GROUNDING_SET = "grounding_set"
CHECKS_OF = {
    "points_in_boxes": "read as the profile's trainer reads it, every point lies inside its box",
    "boxes_on_targets": "every box is an element of that step measured visible at capture "
    "(visibility.is_target), or a dataset-given box of an import",
    "language_mix": "both en and zh samples, each share within bounds",
    "dedup_rate": "no element twice on near-duplicate screens; the dedup rate is bounded",
}


class GroundingConfig(dg.Config):
    # The model profile (schemas.model_profiles) whose frame points and boxes are in:
    # by default the reasoning set's.
    profile: str = DEFAULT_PROFILE


@dg.asset(
    automation_condition=AFTER_CRAWL, group_name="synthesise", kinds={"webdataset"}, deps=["curated_steps"]
)
def grounding_set(
    context: dg.AssetExecutionContext, config: GroundingConfig, storage: StorageResource, vlm: VLMResource
) -> dg.MaterializeResult:
    """Every visible target of every curated screen, several referring expressions each
    (text, role+text, position, relation, function), EN on English screens and ZH on
    Chinese ones; functional descriptions by the VLM when one is configured (else a
    labelled template); deduplicated over near-duplicate screens, roles capped per screen."""
    backend = vlm.backend()
    describe = None if backend is None else vlm_describer(backend, storage.curated.blobs)
    with storage.shard_destination(GROUNDING_SET) as out:
        r = write_grounding_set(
            storage.curated,
            out,
            dataset=GROUNDING_SET,
            options=SetOptions(profile=config.profile),
            describe=describe,
        )
    s = r["summary"]
    context.log.info(
        f"grounding set: {s['samples']} samples on {s['unique_screens']} unique "
        f"screens ({r['samples_per_s']:.0f} samples/s)"
    )
    return dg.MaterializeResult(
        metadata={
            "samples": s["samples"],
            "screens": s["screens"],
            "unique_screens": s["unique_screens"],
            "samples_per_unique_screen": round(s["samples_per_unique_screen"], 2),
            "samples_per_s": round(r["samples_per_s"], 1),
            "dropped": dg.MetadataValue.json(s["dropped"]),
            "dedup_rate": round(s["dedup_rate"], 4),
            "balance": dg.MetadataValue.json(s["balance"]),
            "languages": dg.MetadataValue.json(s["languages"]),
            "kinds": dg.MetadataValue.json(s["kinds"]),
            "function_backends": dg.MetadataValue.json(s["function_backends"]),
            "roles": dg.MetadataValue.md(
                plots.image_md(
                    plots.bar_png(s["balance"]["roles_after"] or {"none": 0}, "target roles (after the cap)"),
                    "roles",
                )
            ),
            "model_profile": r["model_profile"],
            "path": dg.MetadataValue.path(r["out_dir"]),
        }
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(name=f"grounding_set_{n}", asset=GROUNDING_SET, blocking=True, description=d)
        for n, d in CHECKS_OF.items()
    ],
    name="grounding_set_checks",
)
def grounding_set_checks(storage: StorageResource):
    results = grounding_checks(storage.shards_dir(GROUNDING_SET), storage.curated)
    for name, result in results.items():
        yield dg.AssetCheckResult(
            asset_key=GROUNDING_SET,
            check_name=f"grounding_set_{name}",
            passed=result["passed"],
            metadata={"detail": result["detail"][:2000]},
        )


GROUNDING_CHECKS = [grounding_set_checks]
