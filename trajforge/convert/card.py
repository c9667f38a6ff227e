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
        "configs": [
            {
                "config_name": dataset,
                "default": True,
                "data_files": [{"split": s, "path": f"data/{s}.parquet"} for s in splits],
            }
        ],
        "dataset_info": {
            "config_name": dataset,
            "features": features._to_yaml_list(),
            "splits": [{"name": s, "num_examples": written["per_split"][s]} for s in splits],
        },
    }
    prov = set_manifest.get("provenance", {})
    sources = set_manifest.get("sources") or {}
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {dataset}",
        "",
        f"Converted by `trajforge convert` from the {set_manifest.get('kind')} set "
        f"`{set_manifest.get('dataset')}` version {set_manifest.get('version')}, model "
        f"profile {written['model_profile']} (coordinates: {written['coords']}).",
        "",
        "## Provenance",
        "",
        f"Pipeline {prov.get('pipeline_version', '?')}, commit {prov.get('git_commit', '?')}.",
        "",
    ]
    for name, n in sorted(sources.items()):
        lines.append(f"- source `{name}`: {n} trajectories (licence: that of the source)")
    verifiers = set_manifest.get("verifiers") or {}
    if verifiers:
        lines.append("- verifiers: " + ", ".join(f"{k} {v}" for k, v in sorted(verifiers.items())))
    lines += [
        "",
        "## Personal data",
        "",
        "Values a source declares synthetic are kept as they are; real values were "
        "replaced by consistent, format-preserving surrogates in every field of a "
        "trajectory and blurred where drawn (trajforge curation, filters.pii_*), before "
        "the set was written.",
        "",
        *_personal_data(set_manifest.get("personal_data")),
    ]
    lines += [
        "",
        "## Counts (`trajforge stats`)",
        "",
        "```json",
        json.dumps(_counts(stats), indent=1, sort_keys=True, ensure_ascii=False),
        "```",
        "",
        f"Samples per split: {json.dumps(written['per_split'])}; per kind: "
        f"{json.dumps(written['per_kind'])}; left out (format cannot express them): "
        f"{written['inexpressible_count']}.",
        "",
        f"Token weights (reasoning 1, action 2, coordinates 4): {written['token_weights']['how']}.",
        "",
    ]
    return "\n".join(lines)


def _counts(stats: dict) -> dict:
    keep = (
        "languages",
        "platforms",
        "apps",
        "action_types",
        "kinds",
        "modes",
        "samples",
        "steps",
        "trajectories",
        "unique_screens",
        "skipped_steps",
        "skipped_trajectories",
    )
    out = {k: stats[k] for k in keep if k in stats}
    summary = stats.get("summary") or {}
    # Dedup: the grounding set's own figures; a reasoning set is deduplicated upstream
    # by curation (its skipped_* counts are what the set itself left out).
    out.update({k: summary[k] for k in ("deduplicated", "dedup_rate", "dropped") if k in summary})
    return out


def _personal_data(pd: dict | None) -> list[str]:
    """The set's own figures (synthesis.set_pii: the curation's audit, for its steps)."""
    if not pd or pd.get("audit") is None:
        return [
            "Figures for this set: not recorded ("
            + ((pd or {}).get("note") or "the set's manifest has no personal_data")
            + ").",
            "",
        ]

    def kinds(d: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"

    return [
        f"Of the set's {pd['steps']} steps, {pd['steps_with_personal_data']} held personal "
        f"data. Values replaced by surrogates: {kinds(pd['replaced_by_surrogates'])}; "
        f"kept as a source's synthetic values: {kinds(pd['kept_synthetic'])}; "
        f"blurred where drawn in a screenshot: {pd['blurred_in_screenshots']}; by field: "
        f"{kinds(pd['fields'])} (the curation's {pd['audit']}, which names no value).",
        "",
    ]
