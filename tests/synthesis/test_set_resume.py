"""A killed reasoning, Chinese or grounding set write resumes from its last journaled
shard: the same bytes as an uninterrupted run, no duplicates (as the export's does,
tests/export/test_export_resume.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from synthesis.cot import generate_cot
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import ReasoningSetOptions, SetOptions
from synthesis.set_writer import write_chinese_gui_set, write_reasoning_set
from tests.export.shard_fixtures import build_store
from tests.synthesis.grounding_fixtures import build_grounding_store
from trajforge.publish.resume import STAGING_PREFIX
from trajforge.publish.shards import iter_samples, read_manifest, verify
from trajforge.publish.writer import JOURNAL

ROOT = Path(__file__).resolve().parents[2]
SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))
# Small shards, so that a trajectory straddles them and a killed run leaves several.
WRITERS = {
    "reasoning": (
        write_reasoning_set,
        dict(dataset="reasoning", options=ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=3)),
    ),
    "chinese": (
        write_chinese_gui_set,
        dict(options=ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=2)),
    ),
    "grounding": (
        write_grounding_set,
        dict(options=SetOptions(splits=(("train", 0.5), ("test", 0.5)), max_samples_per_shard=1)),
    ),
}

# Writes one set in a child process that SIGKILLs itself after trajectory n.
CHILD = """
import json, os, signal, sys
from pathlib import Path
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import ReasoningSetOptions, SetOptions
from synthesis.set_writer import write_chinese_gui_set, write_reasoning_set
from trajforge.store.raw import RawStore
kind, root, out, n, cot_file, options = sys.argv[1:7]
done = 0
def progress(_):
    global done
    done += 1
    if done == int(n):
        os.kill(os.getpid(), signal.SIGKILL)
options = dict(eval(options), progress=progress)
store = RawStore(Path(root))
if kind == "grounding":
    write_grounding_set(store, Path(out), **options)
else:
    write = write_reasoning_set if kind == "reasoning" else write_chinese_gui_set
    write(store, json.loads(Path(cot_file).read_text()), Path(out), **options)
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """{kind: (store root, CoT rows file or None)}."""
    root = tmp_path_factory.mktemp("inputs")
    built = build_store(root / "curated")
    rows = [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]
    cot_file = root / "cot.json"
    cot_file.write_text(json.dumps(rows, ensure_ascii=False))
    grounding = build_grounding_store(root / "grounding", per_language=4)
    return {
        "reasoning": (built.root, cot_file),
        "chinese": (built.root, cot_file),
        "grounding": (grounding.store.root, None),
    }


def _write(kind: str, inputs, out: Path, **extra) -> dict:
    write, options = WRITERS[kind]
    root, cot_file = inputs[kind]
    if kind == "grounding":
        return write(root, out, **options, **extra)
    return write(root, json.loads(cot_file.read_text()), out, **options, **extra)


def _kill_self(kind: str, inputs, out: Path, after: int) -> list[dict]:
    root, cot_file = inputs[kind]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            kind,
            str(root),
            str(out),
            str(after),
            str(cot_file),
            repr(WRITERS[kind][1]),
        ],
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL
    assert not (out / "manifest.json").exists()
    staging = list(out.glob(f"{STAGING_PREFIX}*"))
    assert len(staging) == 1
    return [json.loads(line) for line in (staging[0] / JOURNAL).read_text().splitlines()]


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_killed_set_write_resumes_to_the_same_bytes(kind, inputs, tmp_path):
    reference = tmp_path / "ref"
    assert _write(kind, inputs, reference)["resumed_shards"] == 0
    out = tmp_path / "out"
    journaled = _kill_self(kind, inputs, out, after=4)
    assert 1 <= len(journaled) < len(read_manifest(reference)["shards"])

    summary = _write(kind, inputs, out)
    assert summary["resumed_shards"] == len(journaled)
    assert _files(out) == _files(reference)  # every shard, manifest, quarantine; no staging left
    keys = [k for k, _ in iter_samples(out)]
    assert len(keys) == len(set(keys)) and verify(out) == []


def test_other_cot_rows_start_over(inputs, tmp_path):
    out = tmp_path / "out"
    assert _kill_self("reasoning", inputs, out, after=4)
    rows = json.loads(inputs["reasoning"][1].read_text())
    rows[0]["plan"] += " (rewritten)"
    write, options = WRITERS["reasoning"]
    summary = write(inputs["reasoning"][0], rows, out, **options)
    assert summary["resumed_shards"] == 0
    assert not list(out.glob(f"{STAGING_PREFIX}*"))
