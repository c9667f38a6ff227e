"""Consolidate the raw store's collections into one validated steps table.

Every committed batch of every collection (web crawls, mobile crawls,
imports) is streamed through validation into `raw_steps/steps.parquet` and
`raw_steps/trajectories.parquet`. A row that fails validation is quarantined
in `raw_steps/quarantine.jsonl` with its file, record and field; it is never
dropped without a count.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.arrow import (
    STEP_SCHEMA,
    TRAJECTORY_SCHEMA,
    row_to_step,
    row_to_trajectory,
    step_to_row,
    trajectory_to_row,
)
from schemas.errors import SchemaError
from trajforge.store.raw import RawStore


@dataclass
class ConsolidateResult:
    trajectories: int = 0
    steps: int = 0
    quarantined: int = 0
    outcomes: dict = field(default_factory=dict)
    languages: dict = field(default_factory=dict)
    policies: dict = field(default_factory=dict)
    apps: dict = field(default_factory=dict)
    action_types: dict = field(default_factory=dict)
    collections: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def consolidate(store: RawStore, out_dir: Path, collections=None, batch_rows: int = 512) -> ConsolidateResult:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    res = ConsolidateResult(collections=store._select(collections))
    outcomes, langs, policies, apps, actions = Counter(), Counter(), Counter(), Counter(), Counter()

    traj_rows, steps_per_traj = {}, {}
    quarantine = []
    for f in store.trajectory_files(collections):
        for row in store.read_table(f, schema=TRAJECTORY_SCHEMA).to_pylist():
            try:
                t = row_to_trajectory(row, source=str(f))
            except SchemaError as e:
                quarantine.append({"file": str(f), "record": row.get("trajectory_id"), "error": str(e)})
                continue
            if t.trajectory_id in traj_rows:
                quarantine.append(
                    {"file": str(f), "record": t.trajectory_id, "error": "duplicate trajectory id"}
                )
                continue
            traj_rows[t.trajectory_id] = t
            steps_per_traj[t.trajectory_id] = 0

    steps_tmp = out_dir / ".steps.parquet.tmp"
    with pq.ParquetWriter(steps_tmp, STEP_SCHEMA, compression="zstd") as writer:
        buf = []
        for f in store.step_files(collections):
            for batch in store.iter_batches(f, batch_rows):
                for row in batch.to_pylist():
                    try:
                        s = row_to_step(row, source=str(f))
                    except SchemaError as e:
                        quarantine.append(
                            {
                                "file": str(f),
                                "record": f"{row.get('trajectory_id')}#{row.get('index')}",
                                "error": str(e),
                            }
                        )
                        continue
                    if s.trajectory_id not in traj_rows:
                        quarantine.append(
                            {
                                "file": str(f),
                                "record": f"{s.trajectory_id}#{s.index}",
                                "error": "step of a trajectory that is not committed",
                            }
                        )
                        continue
                    steps_per_traj[s.trajectory_id] += 1
                    actions[s.action.type.value] += 1
                    buf.append(step_to_row(s))
                    if len(buf) >= batch_rows:
                        writer.write_table(pa.Table.from_pylist(buf, schema=STEP_SCHEMA))
                        buf = []
        if buf:
            writer.write_table(pa.Table.from_pylist(buf, schema=STEP_SCHEMA))

    kept = []
    for tid, t in traj_rows.items():
        if steps_per_traj[tid] != t.num_steps:
            quarantine.append(
                {
                    "file": None,
                    "record": tid,
                    "error": f"num_steps={t.num_steps} but {steps_per_traj[tid]} steps stored",
                }
            )
        kept.append(t)
        outcomes[t.outcome] += 1
        langs[t.task.language] += 1
        policies[t.policy] += 1
        apps[t.app] += 1
    kept.sort(key=lambda t: t.trajectory_id)
    traj_tmp = out_dir / ".trajectories.parquet.tmp"
    pq.write_table(
        pa.Table.from_pylist([trajectory_to_row(t) for t in kept], schema=TRAJECTORY_SCHEMA),
        traj_tmp,
        compression="zstd",
    )
    q_tmp = out_dir / ".quarantine.jsonl.tmp"
    q_tmp.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in quarantine))
    os.replace(steps_tmp, out_dir / "steps.parquet")
    os.replace(traj_tmp, out_dir / "trajectories.parquet")
    os.replace(q_tmp, out_dir / "quarantine.jsonl")

    res.trajectories = len(kept)
    res.steps = sum(actions.values())
    res.quarantined = len(quarantine)
    res.outcomes, res.languages = dict(outcomes), dict(langs)
    res.policies, res.apps, res.action_types = dict(policies), dict(apps), dict(actions.most_common())
    (out_dir / "summary.json").write_text(json.dumps(res.as_dict(), indent=2, sort_keys=True))
    return res
