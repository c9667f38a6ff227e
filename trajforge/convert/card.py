"""The dataset card (README.md) of an hf-parquet output: the Hub's YAML header and counts."""
from __future__ import annotations

import json


def card(dataset: str, set_manifest: dict, written: dict, stats: dict, features) -> str:
    import yaml

    splits = sorted(written["per_split"])
    header = {
        "license": "other",
        "license_name": "trajforge-sources",
        "license_details": "per source, see Provenance below",
        "pretty_name": dataset,
        "task_categories": ["image-text-to-text"],
        "tags": ["gui-agent", "trajforge", set_manifest.get("kind", "")],
        "configs": [{"config_name": dataset, "default": True,
                     "data_files": [{"split": s, "path": f"data/{s}.parquet"} for s in splits]}],
        "dataset_info": {"config_name": dataset,
                         "features": features._to_yaml_list(),
                         "splits": [{"name": s, "num_examples": written["per_split"][s]}
                                    for s in splits]},
    }
    prov = set_manifest.get("provenance", {})
    sources = set_manifest.get("sources") or {}
    lines = ["---", yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(), "---",
             "", f"# {dataset}", "",
             f"Converted by `trajforge convert` from the {set_manifest.get('kind')} set "
             f"`{set_manifest.get('dataset')}` version {set_manifest.get('version')}, model "
             f"profile {written['model_profile']} (coordinates: {written['coords']}).", "",
             "## Provenance", "",
             f"Pipeline {prov.get('pipeline_version', '?')}, commit {prov.get('git_commit', '?')}.",
             ""]
    for name, n in sorted(sources.items()):
        lines.append(f"- source `{name}`: {n} trajectories (licence: that of the source)")
    verifiers = set_manifest.get("verifiers") or {}
    if verifiers:
        lines.append("- verifiers: " + ", ".join(f"{k} {v}" for k, v in sorted(verifiers.items())))
    lines += ["", "## Personal data", "",
              "Values a source declares synthetic are kept as they are; real values were "
              "replaced by consistent, format-preserving surrogates in every field of a "
              "trajectory and blurred where drawn (trajforge curation, filters.pii_*), before "
              "the set was written.", ""]
    lines += ["", "## Counts (`trajforge stats`)", "", "```json",
              json.dumps(_counts(stats), indent=1, sort_keys=True, ensure_ascii=False), "```", "",
              f"Samples per split: {json.dumps(written['per_split'])}; per kind: "
              f"{json.dumps(written['per_kind'])}; left out (format cannot express them): "
              f"{written['inexpressible_count']}.", ""]
    return "\n".join(lines)


def _counts(stats: dict) -> dict:
    keep = ("languages", "platforms", "apps", "action_types", "kinds", "modes", "samples",
            "steps", "trajectories", "unique_screens", "skipped_steps", "skipped_trajectories")
    out = {k: stats[k] for k in keep if k in stats}
    summary = stats.get("summary") or {}
    # Dedup: the grounding set's own figures; a reasoning set is deduplicated upstream
    # by curation (its skipped_* counts are what the set itself left out).
    out.update({k: summary[k] for k in ("deduplicated", "dedup_rate", "dropped") if k in summary})
    return out
