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
# written by 9649b74 with the same pin, then again at schema 1.2 (the samples' and
# manifests' schema_version, and the step's new probes_json column, null here).
GOLDEN = {
    "chinese": "ba49f26f897923b7c8cab9b145bca60a2bc0bc24d85fe4aaf75e4bff6972a58f",
    "export": "070d721dd2b515162398286cb6e30b120feb393663646d6e28bf40db18f93dd0",
    "grounding": "17585fcdcd3d858d5007744a579090b0b001e312713610993a7b83dc327efa84",
    "reasoning": "a5d66329ee3359ea6830ebe2c9c51ccb51e62b5ef725ab4ba3100aeccd78bf25",
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
