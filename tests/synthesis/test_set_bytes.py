"""No behaviour change in the shard-set writer (issue 25, rule 9): the export, the
reasoning and Chinese sets and the grounding set written from one small curated fixture
give the bytes the writers gave before they became one (commit 9649b74).

The git commit, which the fixture's trajectories, every manifest and every reasoning and
grounding sample record, is pinned (the sets are written in a child process that cannot
run git and is given TRAJFORGE_GIT_COMMIT); everything else (every shard, quarantine file
and manifest) is compared byte for byte. The pipeline version (pyproject's) is in the
bytes too: a new version changes the digests. A change to a set's format is a behaviour
change: when it is meant, say so in its commit and take the new digests from the failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from synthesis.cot import generate_cot
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import ReasoningSetOptions, SetOptions
from synthesis.set_writer import write_chinese_gui_set, write_reasoning_set
from tests.export.shard_fixtures import build_store
from tests.synthesis.grounding_fixtures import build_grounding_store
from trajforge.publish.export import export_shards

SPLITS = (("train", 0.6), ("val", 0.2), ("test", 0.2))
ROOT = Path(__file__).resolve().parents[2]
# sha256 of the lines "<file> <sha256 of the file>" of each set (see digests), as
# written by 9649b74 with the same pin.
GOLDEN = {
    "chinese": "a3edd8c148241096341bd84d3f46c21cd7d0e0de077f158c86671408c8ed0d09",
    "export": "acb3caf4321f6544bfa1cffb1deb587ef8a8601d9d180db1f9d72362eacf9467",
    "grounding": "1fc7edf1c8f0bbac99cb6f7daab93972582c76507d43ed1e4d803064ff29c3a9",
    "reasoning": "d06aec6ba6e45eb7bb11c138de7f2d28bcf8135d15be622ff9e3f53698c90909",
}


def write_sets(root: Path) -> Path:
    """Every set from the fixtures under root/in, into root/out/<set>; returns root/out."""
    built = build_store(root / "in" / "curated")
    grounding = build_grounding_store(root / "in" / "grounding", per_language=3)
    out = root / "out"
    export_shards(
        built.store,
        out / "export",
        dataset="demo",
        splits=SPLITS,
        max_samples_per_shard=3,
        resolution="448",
        allow_index_gaps=True,
    )
    rows = [
        c.to_row()
        for c in generate_cot([(built.trajectories[t], built.steps[t]) for t in sorted(built.trajectories)])
    ]
    options = ReasoningSetOptions(splits=SPLITS, max_samples_per_shard=5)
    write_reasoning_set(built.store, rows, out / "reasoning", dataset="reasoning", options=options)
    write_chinese_gui_set(built.store, rows, out / "chinese", options=options)
    grounding_options = SetOptions(splits=(("train", 0.5), ("test", 0.5)), max_samples_per_shard=2)
    write_grounding_set(grounding.store, out / "grounding", options=grounding_options)
    return out


def digests(out: Path) -> dict[str, str]:
    """{set: sha256 of its lines "<file> <sha256 of the file>"}."""
    found = {}
    for set_dir in sorted(out.iterdir()):
        lines = "".join(
            f"{p.name} {hashlib.sha256(p.read_bytes()).hexdigest()}\n" for p in sorted(set_dir.iterdir())
        )
        found[set_dir.name] = hashlib.sha256(lines.encode()).hexdigest()
    return found


CHILD = """
import json, sys
from pathlib import Path
from tests.synthesis.test_set_bytes import digests, write_sets
print(json.dumps(digests(write_sets(Path(sys.argv[1])))))
"""


def test_every_set_has_the_bytes_it_had_before_the_writers_became_one(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=str(tmp_path / "no-git"), TRAJFORGE_GIT_COMMIT="0" * 40)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.splitlines()[-1]) == GOLDEN
