"""Blocking checks on curated_steps: the table reconciles, rates are sane, no planted PII is left."""

import json

import dagster as dg

from dagster_project.resources import StorageResource
from filters.audit import curated_pii_audit, unexplained_drops
from filters.stages.write import PII_AUDIT
from sandbox.planted_pii import planted_for

MAX_DUPLICATE_RATE = 0.5  # more means a crawler stuck on one screen, not a dataset
MAX_NOOP_RATE = 0.3


def _summary(storage: StorageResource) -> dict:
    return json.loads((storage.curated_dir / "summary.json").read_text())


@dg.asset_check(
    asset="curated_steps",
    blocking=True,
    description="Steps in = steps kept + steps dropped per reason; every drop has a reason.",
)
def curated_steps_reconcile(storage: StorageResource) -> dg.AssetCheckResult:
    s = _summary(storage)
    dropped = sum(s["dropped"].values())
    no_reason = unexplained_drops(storage.curated_dir / "steps.parquet")
    return dg.AssetCheckResult(
        passed=s["steps_in"] == s["steps_kept"] + dropped and no_reason == 0,
        metadata={
            "steps_in": s["steps_in"],
            "steps_kept": s["steps_kept"],
            "steps_dropped": dropped,
            "drops_without_reason": no_reason,
        },
    )


@dg.asset_check(
    asset="curated_steps",
    blocking=True,
    description=f"Exact and near duplicates are at most {MAX_DUPLICATE_RATE:.0%} of the steps.",
)
def curated_duplicate_rate(storage: StorageResource) -> dg.AssetCheckResult:
    s = _summary(storage)
    dups = s["dropped"].get("exact_duplicate", 0) + s["dropped"].get("near_duplicate", 0)
    rate = dups / s["steps_in"] if s["steps_in"] else 0.0
    return dg.AssetCheckResult(
        passed=rate <= MAX_DUPLICATE_RATE,
        metadata={"duplicates": dups, "rate": round(rate, 4), "max_rate": MAX_DUPLICATE_RATE},
    )


@dg.asset_check(
    asset="curated_steps",
    blocking=True,
    description=f"No-op steps are at most {MAX_NOOP_RATE:.0%} of the steps.",
)
def curated_noop_rate(storage: StorageResource) -> dg.AssetCheckResult:
    s = _summary(storage)
    noops = s["dropped"].get("no_op", 0)
    rate = noops / s["steps_in"] if s["steps_in"] else 0.0
    return dg.AssetCheckResult(
        passed=rate <= MAX_NOOP_RATE,
        metadata={"no_ops": noops, "rate": round(rate, 4), "max_rate": MAX_NOOP_RATE},
    )


@dg.asset_check(
    asset="curated_steps",
    blocking=True,
    description="No planted personal data is left in a real-data trajectory of the curated "
    "steps; in synthetic ones (the sandbox) it is kept and listed in pii_audit.jsonl.",
)
def curated_no_planted_pii(storage: StorageResource) -> dg.AssetCheckResult:
    s = _summary(storage)
    synthetic = s.get("pii_synthetic_sources", [])
    audit = curated_pii_audit(storage.curated, synthetic, planted=planted_for)
    listed = _audited_trajectories(storage.curated_dir / PII_AUDIT)
    unlisted = sorted({k["trajectory_id"] for k in audit["kept"]} - listed)
    return dg.AssetCheckResult(
        passed=not audit["leaks"] and not unlisted,
        metadata={
            "trajectories_checked": audit["checked"],
            "leaks": len(audit["leaks"]),
            "synthetic_sources": dg.MetadataValue.json(synthetic),
            "synthetic_values_kept": len(audit["kept"]),
            "kept_but_not_in_audit": dg.MetadataValue.json(unlisted[:5]),
            "first": dg.MetadataValue.json(audit["leaks"][:5]),
        },
    )


def _audited_trajectories(path) -> set[str]:
    """Trajectories with a kept_synthetic line in curation's PII audit."""
    if not path.exists():
        return set()
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("action") == "kept_synthetic":
                out.add(rec["trajectory_id"])
    return out


CURATE_CHECKS = [curated_steps_reconcile, curated_duplicate_rate, curated_noop_rate, curated_no_planted_pii]
