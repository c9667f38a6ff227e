"""A set's manifest counts what curation did to the personal data of its own steps
(synthesis.set_pii), and the hf-parquet card a lab publishes says it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from filters.config import CurateConfig
from filters.pipeline import curate
from synthesis.cot import generate_cot
from synthesis.set_options import ReasoningSetOptions
from synthesis.set_writer import write_reasoning_set
from trajforge.convert import convert
from trajforge.convert.source import iter_items
from trajforge.store.raw import RawStore


def _set_from(curated_dir, out, **kw):
    store = RawStore(curated_dir / "store")
    trajs = {t.trajectory_id: t for t in store.iter_trajectories()}
    steps: dict = {}
    for s in store.iter_steps():
        steps.setdefault(s.trajectory_id, []).append(s)
    rows = [c.to_row() for c in generate_cot([(trajs[t], steps[t]) for t in sorted(steps)])]
    options = ReasoningSetOptions(splits=(("train", 1.0),), min_steps=1)
    write_reasoning_set(store, rows, out, dataset="pd", options=options, **kw)
    return json.loads((out / "manifest.json").read_text())


def test_the_set_counts_its_own_steps_personal_data_and_the_card_says_it(raw, tmp_path):
    real = curate(
        raw.dir, raw.blobs, tmp_path / "cur", config=CurateConfig(synthetic_sources=(), ocr="never")
    )
    manifest = _set_from(real.out_dir, tmp_path / "set")
    pd = manifest["personal_data"]

    # From the outside: the samples the set ships, against the curation's audit lines.
    shipped = {(i.meta["trajectory_id"], i.meta["index"]) for i in iter_items(tmp_path / "set")}
    audit = [json.loads(x) for x in (real.out_dir / "pii_audit.jsonl").read_text().splitlines()]
    mine = [
        a
        for a in audit
        if (a["trajectory_id"], a["index"]) in shipped
        or (a["index"] is None and a["trajectory_id"] in {t for t, _ in shipped})
    ]
    assert mine and pd["steps"] == len(shipped)
    assert pd["replaced_by_surrogates"] == dict(Counter(a["kind"] for a in mine))
    assert pd["replaced_by_surrogates"].get("email", 0) >= 1  # the planted address of t01_good
    assert pd["kept_synthetic"] == {}
    assert pd["steps_with_personal_data"] == len(
        {(a["trajectory_id"], a["index"]) for a in mine if a["index"] is not None}
    )
    assert pd["blurred_in_screenshots"] == sum(1 for a in mine if a["box"] is not None)

    convert(tmp_path / "set", "hf-parquet", tmp_path / "hf")
    card = (tmp_path / "hf" / "README.md").read_text()
    assert f"Of the set's {pd['steps']} steps, {pd['steps_with_personal_data']} held personal" in card
    assert (
        "Values replaced by surrogates: "
        + ", ".join(f"{k} {v}" for k, v in pd["replaced_by_surrogates"].items())
        in card
    )


def test_a_synthetic_source_is_counted_as_kept_and_a_missing_audit_is_said(raw, tmp_path):
    kept = curate(raw.dir, raw.blobs, tmp_path / "cur", config=CurateConfig(ocr="never"))
    pd = _set_from(kept.out_dir, tmp_path / "set")["personal_data"]
    assert pd["replaced_by_surrogates"] == {} and pd["kept_synthetic"].get("email", 0) >= 1

    (kept.out_dir / "pii_audit.jsonl").unlink()
    pd = _set_from(kept.out_dir, tmp_path / "set2")["personal_data"]
    assert pd["audit"] is None and "not counted" in pd["note"]
    convert(tmp_path / "set2", "hf-parquet", tmp_path / "hf")
    assert "Figures for this set: not recorded" in (tmp_path / "hf" / "README.md").read_text()


def test_steps_outside_the_set_are_not_counted(raw, tmp_path):
    """A set of English tasks only: the audit lines of the other steps stay out."""
    real = curate(
        raw.dir, raw.blobs, tmp_path / "cur", config=CurateConfig(synthetic_sources=(), ocr="never")
    )
    everything = _set_from(real.out_dir, tmp_path / "all")["personal_data"]
    audit = real.out_dir / "pii_audit.jsonl"
    extra = {
        "trajectory_id": "not-in-the-set",
        "index": 0,
        "kind": "email",
        "field": "a11y_tree",
        "action": "surrogate",
        "box": [0, 0, 1, 1],
        "box_source": "a11y",
        "note": None,
    }
    with open(audit, "a", encoding="utf-8") as f:
        f.write(json.dumps(extra) + "\n")
    again = _set_from(real.out_dir, tmp_path / "again")["personal_data"]
    assert again == everything
    with open(audit, "a", encoding="utf-8") as f:
        f.write("{not json\n")
    with pytest.raises(ValueError, match=r"pii_audit.jsonl: line \d+"):
        _set_from(real.out_dir, tmp_path / "bad")


def test_fields_are_counted_by_kind_of_field_not_by_position(raw, tmp_path):
    real = curate(
        raw.dir, raw.blobs, tmp_path / "cur", config=CurateConfig(synthetic_sources=(), ocr="never")
    )
    fields = _set_from(real.out_dir, tmp_path / "set")["personal_data"]["fields"]
    import re

    position = re.compile(r"\[\d+\]")
    assert fields and not any(position.search(f) for f in fields)
    assert "elements[].name" in fields
    audit = [json.loads(x) for x in (real.out_dir / "pii_audit.jsonl").read_text().splitlines()]
    assert any(position.search(a["field"]) for a in audit)  # the audit names positions
