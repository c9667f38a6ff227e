"""Blocking checks on curated_steps: the table reconciles, rates are sane, no planted PII is left."""
import json

import dagster as dg

from dagster_project.resources import StorageResource
from filters.audit import curated_leaks, unexplained_drops

MAX_DUPLICATE_RATE = 0.5   # more means a crawler stuck on one screen, not a dataset
MAX_NOOP_RATE = 0.3


def _summary(storage: StorageResource) -> dict:
    return json.loads((storage.curated_dir / "summary.json").read_text())


@dg.asset_check(asset="curated_steps", blocking=True,
                description="Steps in = steps kept + steps dropped per reason; every drop has a reason.")
def curated_steps_reconcile(storage: StorageResource) -> dg.AssetCheckResult:
    s = _summary(storage)
    dropped = sum(s["dropped"].values())
    no_reason = unexplained_drops(storage.curated_dir / "steps.parquet")
    return dg.AssetCheckResult(
        passed=s["steps_in"] == s["steps_kept"] + dropped and no_reason == 0,
        metadata={"steps_in": s["steps_in"], "steps_kept": s["steps_kept"], "steps_dropped": dropped,
                  "drops_without_reason": no_reason})


@dg.asset_check(asset="curated_steps", blocking=True,
                description=f"Exact and near duplicates are at most {MAX_DUPLICATE_RATE:.0%} of the steps.")
def curated_duplicate_rate(storage: StorageResource) -> dg.AssetCheckResult:
    s = _summary(storage)
    dups = s["dropped"].get("exact_duplicate", 0) + s["dropped"].get("near_duplicate", 0)
    rate = dups / s["steps_in"] if s["steps_in"] else 0.0
    return dg.AssetCheckResult(passed=rate <= MAX_DUPLICATE_RATE, metadata={
        "duplicates": dups, "rate": round(rate, 4), "max_rate": MAX_DUPLICATE_RATE})


@dg.asset_check(asset="curated_steps", blocking=True,
                description=f"No-op steps are at most {MAX_NOOP_RATE:.0%} of the steps.")
def curated_noop_rate(storage: StorageResource) -> dg.AssetCheckResult:
    s = _summary(storage)
    noops = s["dropped"].get("no_op", 0)
    rate = noops / s["steps_in"] if s["steps_in"] else 0.0
    return dg.AssetCheckResult(passed=rate <= MAX_NOOP_RATE, metadata={
        "no_ops": noops, "rate": round(rate, 4), "max_rate": MAX_NOOP_RATE})


@dg.asset_check(asset="curated_steps", blocking=True,
                description="No personal data the sandbox planted is left in any text field of the curated steps.")
def curated_no_planted_pii(storage: StorageResource) -> dg.AssetCheckResult:
    checked, leaks = curated_leaks(storage.curated)
    return dg.AssetCheckResult(passed=not leaks, metadata={
        "trajectories_checked": checked, "leaks": len(leaks), "first": dg.MetadataValue.json(leaks[:5])})


CURATE_CHECKS = [curated_steps_reconcile, curated_duplicate_rate, curated_noop_rate, curated_no_planted_pii]
