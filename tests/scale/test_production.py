"""dagster_project.production: the executor from $TRAJFORGE_EXECUTOR, the data root as an fsspec URL."""

from __future__ import annotations

import dagster as dg
import fsspec
import pytest

from dagster_project.production import (
    check_storage_root,
    parse_storage_root,
    production_executor,
    publish_dir,
)


def test_executor_follows_the_environment():
    assert production_executor({}) is None  # Dagster's default
    assert production_executor({"TRAJFORGE_EXECUTOR": "in_process"}) is dg.in_process_executor
    mp = production_executor({"TRAJFORGE_EXECUTOR": "multiprocess", "TRAJFORGE_MAX_CONCURRENT": "4"})
    assert mp.name == "multiprocess_executor"
    config = mp.config_schema.resolve_config({}).value["config"]
    assert config["max_concurrent"] == 4
    # Steps fork from a warm forkserver; every preloaded module exists.
    preload = config["start_method"]["forkserver"]["preload_modules"]
    assert "dagster_project.resources" in preload
    import importlib.util

    assert all(importlib.util.find_spec(m) is not None for m in preload)
    default = production_executor({"TRAJFORGE_EXECUTOR": "multiprocess"})
    assert default.config_schema.resolve_config({}).value["config"]["max_concurrent"] == 2


@pytest.mark.parametrize(
    "env, message",
    [
        ({"TRAJFORGE_EXECUTOR": "k8s_job"}, r"\$TRAJFORGE_EXECUTOR='k8s_job' is not one of"),
        (
            {"TRAJFORGE_EXECUTOR": "multiprocess", "TRAJFORGE_MAX_CONCURRENT": "two"},
            "'two' is not an integer",
        ),
        ({"TRAJFORGE_EXECUTOR": "k8s", "TRAJFORGE_MAX_CONCURRENT": "0"}, "must be >= 1"),
    ],
)
def test_bad_executor_settings_are_named(env, message):
    with pytest.raises(ValueError, match=message):
        production_executor(env)


@pytest.mark.parametrize(
    "root, protocol, path",
    [
        ("/srv/data", "file", "/srv/data"),
        ("file:///srv/data/", "file", "/srv/data"),
        ("s3://bucket/trajforge/", "s3", "bucket/trajforge"),
        ("gs://bucket", "gs", "bucket"),
    ],
)
def test_storage_roots_parse(root, protocol, path):
    parsed = parse_storage_root(root)
    assert (parsed.protocol, parsed.path) == (protocol, path)
    assert parsed.url == f"{protocol}://{path}"
    assert parsed.is_local == (protocol == "file")


def test_relative_paths_resolve_and_remote_roots_have_no_local_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_storage_root("data").local_path() == tmp_path / "data"
    with pytest.raises(ValueError, match="s3://b/p: the raw/curated stores need a local path"):
        parse_storage_root("s3://b/p").local_path()


@pytest.mark.parametrize(
    "root, message",
    [
        ("", "data root is empty"),
        ("s3:///prefix", "no bucket"),
        ("file://host/x", "a file URL has no host"),
        ("ftp://h/x", "protocol 'ftp' is not one of"),
    ],
)
def test_bad_storage_roots_are_named(root, message):
    with pytest.raises(ValueError, match=message):
        parse_storage_root(root)


def test_check_storage_root_names_the_missing_fsspec_package(tmp_path):
    assert check_storage_root(str(tmp_path)).path == str(tmp_path)
    import importlib.util

    if importlib.util.find_spec("s3fs") is None:
        with pytest.raises(ValueError, match="needs the 's3fs' package"):
            check_storage_root("s3://bucket/x")
    else:
        assert check_storage_root("s3://bucket/x").protocol == "s3"


def test_publish_dir_copies_every_file(tmp_path):
    src = tmp_path / "shards"
    (src / "train").mkdir(parents=True)
    (src / "train" / "a-000000.tar").write_bytes(b"tar bytes")
    (src / "manifest.json").write_text("{}")
    fs = fsspec.filesystem("memory")
    assert publish_dir(src, "memory://bucket/run1") == 2
    assert fs.cat("/bucket/run1/train/a-000000.tar") == b"tar bytes"
    assert fs.cat("/bucket/run1/manifest.json") == b"{}"
    out = tmp_path / "published"
    assert publish_dir(src, out.as_uri()) == 2
    assert (out / "train" / "a-000000.tar").read_bytes() == b"tar bytes"
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        publish_dir(tmp_path / "missing", "memory://x")
