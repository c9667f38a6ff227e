"""Blocking checks on the two training sets, read back from their shards (once per set).

A check that could not run (alignment on template thoughts) fails with severity WARN:
a warning in the UI, not a pass, and it does not block the downstream assets."""

import dagster as dg

from dagster_project.assets.synthesis import CHINESE_GUI_SET, REASONING_SET
from dagster_project.resources import StorageResource
from synthesis.frame_check import tap_answers_in_box
from synthesis.placeholders import placeholder_counts
from synthesis.set_stats import reasoning_set_stats, set_checks

CHECKS_OF = {
    "answers_parse": "every answer parses back to the recorded action and its spans are exact",
    "mix_1_to_1": "reason-then-act and direct-act samples are 1:1",
    "language": "the set's languages (and, for the Chinese set, Chinese thoughts)",
    "alignment_rate": "the share of checked steps the alignment checks kept",
    "taps_in_box": "read as its model profile's trainer reads it (image resized, answer "
    "parsed, point mapped back to the screenshot), every tap-like answer "
    "lands inside its recorded target box",
}


def _set_checks(asset: str, dataset: str, **kw):
    specs = [
        dg.AssetCheckSpec(name=f"{asset}_{name}", asset=asset, blocking=True, description=d)
        for name, d in CHECKS_OF.items()
    ]

    @dg.multi_asset_check(specs=specs, name=f"{asset}_checks")
    def checks(storage: StorageResource):
        stats = reasoning_set_stats(storage.shards_dir(dataset))
        results = set_checks(stats, skipped_steps=stats["skipped_steps"], **kw)
        taps = tap_answers_in_box(storage.shards_dir(dataset))
        results["taps_in_box"] = {
            "passed": taps["passed"],
            "detail": (
                f"{taps['profile']}: {taps['inside']}/{taps['tap_answers']} tap answers inside their "
                f"target box, {taps['outside']} outside ({taps['unparsed']} unparsed, "
                f"{taps['recorded_outside']} recorded outside); examples: {taps['examples']}"
            ),
        }
        for name, result in results.items():
            warn = result.get("severity") == "warn"
            yield dg.AssetCheckResult(
                asset_key=asset,
                check_name=f"{asset}_{name}",
                passed=result["passed"],
                severity=dg.AssetCheckSeverity.WARN if warn else dg.AssetCheckSeverity.ERROR,
                metadata={
                    "detail": result["detail"],
                    "status": "not run"
                    if result.get("not_run")
                    else ("passed" if result["passed"] else "failed"),
                },
            )

    return checks


def _placeholder_check(asset: str, dataset: str):
    @dg.asset_check(
        asset=asset,
        name=f"{asset}_no_placeholder_targets",
        blocking=True,
        description="No training target (gpt turn, answer) holds a personal-data "
        "placeholder such as [EMAIL]: a model would learn to type it.",
    )
    def check(storage: StorageResource) -> dg.AssetCheckResult:
        return placeholder_result(placeholder_counts(storage.shards_dir(dataset)))

    return check


def placeholder_result(counts: dict) -> dg.AssetCheckResult:
    """Fails when any target holds a placeholder; prompts are reported."""
    return dg.AssetCheckResult(
        passed=counts["samples"] > 0 and counts["targets_with_placeholder"] == 0,
        metadata={
            "samples": counts["samples"],
            "targets_with_placeholder": counts["targets_with_placeholder"],
            "prompts_with_placeholder": counts["prompts_with_placeholder"],
            "tokens_in_targets": dg.MetadataValue.json(counts["tokens_in_targets"]),
            "tokens_in_prompts": dg.MetadataValue.json(counts["tokens_in_prompts"]),
            "examples": dg.MetadataValue.json(counts["examples"]),
        },
    )


SYNTHESIS_CHECKS = [
    _set_checks("reasoning_set", REASONING_SET),
    _set_checks("chinese_gui_set", CHINESE_GUI_SET, language="zh", require_chinese_thought=True),
    _placeholder_check("reasoning_set", REASONING_SET),
    _placeholder_check("chinese_gui_set", CHINESE_GUI_SET),
]
