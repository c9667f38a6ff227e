"""Asset checks on the consolidated raw steps."""

import json

import dagster as dg

from dagster_project.resources import StorageResource
from trajforge.report.quality import coordinates_out_of_bounds, oracle_success_rate, undecodable_screenshots

MIN_ORACLE_SUCCESS = 0.95


@dg.asset_check(asset="raw_steps", blocking=True, description="Every row validates against the schema.")
def raw_steps_schema_valid(storage: StorageResource) -> dg.AssetCheckResult:
    q = storage.raw_steps_dir / "quarantine.jsonl"
    bad = [json.loads(line) for line in q.read_text().splitlines() if line.strip()]
    return dg.AssetCheckResult(
        passed=not bad, metadata={"quarantined": len(bad), "first": dg.MetadataValue.json(bad[:5])}
    )


@dg.asset_check(
    asset="raw_steps",
    blocking=True,
    description="Every screenshot exists, decodes and has the recorded size.",
)
def raw_steps_screenshots_decode(storage: StorageResource) -> dg.AssetCheckResult:
    checked, bad = undecodable_screenshots(storage.raw_steps_dir / "steps.parquet", storage.raw.blobs)
    return dg.AssetCheckResult(
        passed=not bad,
        metadata={"screenshots_checked": checked, "bad": len(bad), "first": dg.MetadataValue.json(bad[:5])},
    )


@dg.asset_check(asset="raw_steps", blocking=True, description="Action coordinates lie in [0, 1].")
def raw_steps_coordinates_in_bounds(storage: StorageResource) -> dg.AssetCheckResult:
    bad = coordinates_out_of_bounds(storage.raw_steps_dir / "steps.parquet")
    return dg.AssetCheckResult(passed=bad == 0, metadata={"out_of_bounds": bad})


@dg.asset_check(
    asset="raw_steps",
    description=f"Oracle trajectories a verifier found successful (>= {MIN_ORACLE_SUCCESS:.0%}).",
)
def oracle_success_rate_check(storage: StorageResource) -> dg.AssetCheckResult:
    ok, n = oracle_success_rate(storage.raw_steps_dir / "trajectories.parquet")
    rate = ok / n if n else 0.0
    return dg.AssetCheckResult(
        passed=n > 0 and rate >= MIN_ORACLE_SUCCESS,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"oracle_trajectories": n, "verified_success": ok, "rate": round(rate, 4)},
    )


CHECKS = [
    raw_steps_schema_valid,
    raw_steps_screenshots_decode,
    raw_steps_coordinates_in_bounds,
    oracle_success_rate_check,
]
