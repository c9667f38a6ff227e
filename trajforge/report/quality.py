"""Quality measures over the consolidated tables, used by asset checks."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from schemas.records import is_verified_success
from trajforge.store.raw import BlobStore


def coordinates_out_of_bounds(steps_path: Path) -> int:
    """Steps whose action point lies outside [0, 1] (should be none)."""
    bad = 0
    for batch in pq.ParquetFile(steps_path).iter_batches(columns=["action"], batch_size=4096):
        action = batch.column(0)
        for name in ("x", "y", "x2", "y2"):
            v = pc.struct_field(action, name)
            out = pc.or_(pc.less(v, 0.0), pc.greater(v, 1.0))
            bad += pc.sum(pc.fill_null(out, False).cast("int64")).as_py() or 0
    return bad


def undecodable_screenshots(
    steps_path: Path, blobs: BlobStore, limit: int | None = None
) -> tuple[int, list[str]]:
    """(checked, bad): each screenshot must exist, decode, and match the recorded size."""
    checked, bad, seen = 0, [], set()
    cols = ["screenshot", "image_format", "width", "height"]
    for batch in pq.ParquetFile(steps_path).iter_batches(columns=cols, batch_size=1024):
        for sha, fmt, w, h in zip(*(batch.column(c).to_pylist() for c in cols)):
            # "" is an imported step that came without an image: curation counts
            # it as missing_screenshot; here only stored images are checked.
            if not sha or sha in seen:
                continue
            seen.add(sha)
            checked += 1
            try:
                with Image.open(io.BytesIO(blobs.get(sha, fmt))) as im:
                    im.load()
                    if im.size != (w, h):
                        bad.append(f"{sha}: size {im.size} but recorded {w}x{h}")
            except Exception as e:  # any failure to read is a bad screenshot
                bad.append(f"{sha}: {type(e).__name__}: {e}")
            if limit is not None and checked >= limit:
                return checked, bad
    return checked, bad


def oracle_success_rate(trajectories_path: Path) -> tuple[int, int]:
    """(successes a verifier decided, oracle trajectories) (schemas.records.is_verified_success).

    Reflection episodes are played by the oracle with a deliberate wrong step
    (source_name "sandbox:reflection"): they are not the oracle's record.
    """
    t = pq.read_table(trajectories_path, columns=["policy", "outcome", "verified_by", "source_name"])
    policy = [
        None if (s or "").endswith(":reflection") else p
        for p, s in zip(t.column("policy").to_pylist(), t.column("source_name").to_pylist())
    ]
    outcome = t.column("outcome").to_pylist()
    verified = t.column("verified_by").to_pylist()
    n = sum(1 for p in policy if p == "oracle")
    ok = sum(1 for p, o, v in zip(policy, outcome, verified) if p == "oracle" and is_verified_success(o, v))
    return ok, n
