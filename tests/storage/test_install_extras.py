"""A crawl worker installs core (+ ray, storage), not a trainer: the crawl path
imports with torch, transformers and the k8s libraries blocked."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("torch", "transformers", "tokenizers", "dagster_k8s", "dagster_postgres")
CRAWL_PATH = (
    "crawlers.crawl_driver",
    "crawlers.env_crawl",
    "sandbox.crawl",
    "trajforge.store.raw",
    "trajforge.store.object_store",
    "trajforge.store.consolidate",
)

BLOCKER = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError("blocked for a crawl worker: " + name)
sys.meta_path.insert(0, Block())
import importlib
for m in {CRAWL_PATH!r}:
    importlib.import_module(m)
print("ok")
"""


def test_crawl_path_imports_without_training_or_k8s_libraries():
    out = subprocess.run(
        [sys.executable, "-c", BLOCKER], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_extras_split_core_from_training_and_k8s():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    extras = project["optional-dependencies"]
    for lib in ("torch", "transformers", "dagster-k8s", "s3fs", "ray"):
        assert lib not in core, f"{lib} is a core dependency"
    assert "torch" in " ".join(extras["training"]) and "s3fs" in " ".join(extras["storage"])
    assert "dagster-k8s" in " ".join(extras["k8s"]) and "moto" in " ".join(extras["dev"])
    named = extras["all"][0].split("[", 1)[1].rstrip("]").split(",")
    assert {"training", "k8s", "ray", "storage"} <= set(named)
    assert '".[all,dev]"' in (ROOT / "scripts" / "setup.sh").read_text()
