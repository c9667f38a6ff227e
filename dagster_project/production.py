"""Production choices made from the environment: the executor and the data root.

Pure functions, so the same code path is checked in tests and used in a deployment:

- `production_executor()` reads $TRAJFORGE_EXECUTOR: "k8s" (dagster-k8s's
  k8s_job_executor: one pod per step, launched by the run worker that the
  K8sRunLauncher started), "multiprocess" (one process per step on the run
  worker, $TRAJFORGE_MAX_CONCURRENT at once) or "in_process" (everything in the
  run worker: the cheapest for small runs and tests). Unset means Dagster's
  default (multiprocess, in-process under `dg.materialize`).
- `parse_storage_root()` / `check_storage_root()` validate the data root as an
  fsspec URL (file://, s3://, gs://) and say what the installed stores can use.
  The data root itself is a local folder (the consolidated tables, the writers'
  working copies); StorageResource.object_root (an s3:// URL, checked here) is where
  the curated data and the shard sets are published (trajforge/store/curated_object.py,
  trajforge/publish/remote.py) and raw_url the raw store. `publish_dir()` copies any
  other finished directory to object storage through fsspec.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg

ROOT = Path(__file__).resolve().parent.parent
EXECUTOR_ENV = "TRAJFORGE_EXECUTOR"
MAX_CONCURRENT_ENV = "TRAJFORGE_MAX_CONCURRENT"
K8S_EXECUTOR_CONFIG_ENV = "TRAJFORGE_K8S_EXECUTOR_CONFIG"
DEFAULT_K8S_EXECUTOR_CONFIG = ROOT / "deploy" / "k8s_executor.yaml"
EXECUTORS = ("k8s", "multiprocess", "in_process")
# Imported once by the forkserver: each step process then starts as a fork of a warm
# interpreter (benchmarks/multiprocess_speedup.py: 0.52x instead of 0.35x vs
# in-process for one-task steps under load, spawn paying Dagster's import per step).
PRELOAD_MODULES = [
    "dagster",
    "dagster_project.resources",
    "sandbox.crawl",
    "crawlers.web_env",
    "sandbox.server",
    "trajforge.tasks.catalog",
]

# Object stores fsspec reaches through an extra package; the error names it.
_REMOTE = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs"}
_LOCAL = ("file", "local")


def production_executor(env: Mapping[str, str] | None = None) -> dg.ExecutorDefinition | None:
    """The executor $TRAJFORGE_EXECUTOR names, or None (Dagster's default) when unset.

    "multiprocess": $TRAJFORGE_MAX_CONCURRENT (default 2) parallel step processes,
    forked from a forkserver that preloaded Dagster and the crawler.
    "k8s": k8s_job_executor configured from $TRAJFORGE_K8S_EXECUTOR_CONFIG (default
    deploy/k8s_executor.yaml), $TRAJFORGE_MAX_CONCURRENT overriding its max_concurrent.
    An unknown name or a bad number is an error naming the variable.
    """
    env = os.environ if env is None else env
    kind = env.get(EXECUTOR_ENV, "").strip()
    if not kind:
        return None
    if kind not in EXECUTORS:
        raise ValueError(f"${EXECUTOR_ENV}={kind!r} is not one of {EXECUTORS}")
    if kind == "in_process":
        return dg.in_process_executor
    max_concurrent = _max_concurrent(env)
    if kind == "multiprocess":
        return dg.multiprocess_executor.configured(
            {
                "max_concurrent": max_concurrent or 2,
                "start_method": {"forkserver": {"preload_modules": PRELOAD_MODULES}},
            },
            name="multiprocess_executor",
        )
    from dagster_k8s import k8s_job_executor

    config = k8s_executor_config(env.get(K8S_EXECUTOR_CONFIG_ENV) or DEFAULT_K8S_EXECUTOR_CONFIG)
    if max_concurrent is not None:
        config["max_concurrent"] = max_concurrent
    return k8s_job_executor.configured(config, name="k8s_job_executor")


def _max_concurrent(env: Mapping[str, str]) -> int | None:
    raw = env.get(MAX_CONCURRENT_ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"${MAX_CONCURRENT_ENV}={raw!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"${MAX_CONCURRENT_ENV}={value} must be >= 1")
    return value


def k8s_executor_config(path: Path | str) -> dict:
    """`execution.config` of a run-config YAML, checked against k8s_job_executor's schema
    (Dagster's own validation: a misspelt key is an error naming the file and the key)."""
    import yaml
    from dagster._config import process_config
    from dagster_k8s import k8s_job_executor

    path = Path(path)
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    config = (doc.get("execution") or {}).get("config")
    if not isinstance(config, dict):
        raise ValueError(f"{path}: no execution.config mapping")
    result = process_config(k8s_job_executor.config_schema.config_type, config)
    if not result.success:
        raise ValueError(
            f"{path}: execution.config is not valid k8s_job_executor config: "
            + "; ".join(e.message for e in result.errors)
        )
    return config


@dataclass(frozen=True)
class StorageRoot:
    protocol: str  # "file", "s3", "gs", ...
    path: str  # fsspec path: /abs/dir for file, bucket/prefix for object stores
    url: str  # the normalised URL

    @property
    def is_local(self) -> bool:
        return self.protocol in _LOCAL

    def local_path(self) -> Path:
        """The directory the stores write to; only a local root has one."""
        if not self.is_local:
            raise ValueError(
                f"data root {self.url}: the raw/curated stores need a local path "
                "(mount the bucket as a volume, or publish_dir() finished shards)"
            )
        return Path(self.path)


def parse_storage_root(root: str) -> StorageRoot:
    """A data root as given ($TRAJFORGE_DATA or StorageResource.root): a plain path,
    file:///abs/path, s3://bucket/prefix, gs://bucket/prefix. Errors name the value."""
    if not root or not root.strip():
        raise ValueError("data root is empty: set $TRAJFORGE_DATA or StorageResource.root")
    root = root.strip()
    parts = urlsplit(root)
    scheme = parts.scheme.lower()
    if not scheme or len(scheme) == 1:  # a plain path (or a Windows drive letter)
        path = str(Path(root).resolve())
        return StorageRoot("file", path, f"file://{path}")
    if scheme in _LOCAL:
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"data root {root!r}: a file URL has no host (file:///abs/path)")
        if not parts.path.startswith("/"):
            raise ValueError(f"data root {root!r}: a file URL needs an absolute path")
        return StorageRoot("file", parts.path.rstrip("/") or "/", f"file://{parts.path.rstrip('/') or '/'}")
    if scheme not in _REMOTE:
        raise ValueError(
            f"data root {root!r}: protocol {scheme!r} is not one of {sorted(set(_LOCAL) | set(_REMOTE))}"
        )
    bucket = parts.netloc
    if not bucket:
        raise ValueError(f"data root {root!r}: no bucket ({scheme}://bucket/prefix)")
    prefix = parts.path.strip("/")
    path = f"{bucket}/{prefix}" if prefix else bucket
    return StorageRoot(scheme, path, f"{scheme}://{path}")


def check_storage_root(root: str) -> StorageRoot:
    """parse_storage_root, plus: fsspec knows the protocol and its package is installed."""
    import importlib.util

    import fsspec

    parsed = parse_storage_root(root)
    if parsed.protocol not in fsspec.available_protocols():
        raise ValueError(f"data root {parsed.url}: fsspec has no {parsed.protocol!r} protocol")
    package = _REMOTE.get(parsed.protocol)
    if package and importlib.util.find_spec(package) is None:
        raise ValueError(
            f"data root {parsed.url}: protocol {parsed.protocol!r} needs the "
            f"{package!r} package (pip install {package})"
        )
    return parsed


def publish_dir(local_dir: Path | str, url: str, storage_options: Mapping | None = None) -> int:
    """Copy a finished directory (shards, manifest) to `url` through fsspec; returns
    the files copied. The manifest-like files (*.json) go last, so a reader that
    polls for the manifest never sees it before the shards it names."""
    import fsspec

    local_dir = Path(local_dir)
    if not local_dir.is_dir():
        raise FileNotFoundError(f"publish_dir: {local_dir} is not a directory")
    fs, base = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    files = sorted(
        (p for p in local_dir.rglob("*") if p.is_file()), key=lambda p: (p.suffix == ".json", str(p))
    )
    for p in files:
        target = f"{base.rstrip('/')}/{p.relative_to(local_dir).as_posix()}"
        fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(p), target)
    return len(files)
