"""Dagster on a real PostgreSQL server, configured by deploy/dagster.yaml's storage section.

The test starts its own server (initdb into tmp, pg_ctl on a free loopback port,
password authentication), materialises the task catalog in-process on an
instance whose dagster.yaml is the production one's storage section, and reads
the run and its events back with psycopg2. PostgreSQL refuses to run as root:
as root the server runs as the existing `postgres` user (runuser).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import dagster as dg
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pg-test-password"


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="module")
def postgres():
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl): install Debian's postgresql package")
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("running as root and there is no 'postgres' user for the server to run as")
    # Not under pytest's tmp dir: its parents are private to root, the server user
    # must reach its data directory.
    base = Path(tempfile.mkdtemp(prefix="trajforge-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    pwfile = base / "pw"
    pwfile.write_text(PASSWORD)
    if os.geteuid() == 0:
        for p in (base, sock, pwfile):
            os.chown(p, pw.pw_uid, pw.pw_gid)
    out = subprocess.run(
        _as_server_user(
            [
                initdb,
                "-D",
                str(data),
                "-U",
                "dagster",
                "-A",
                "scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    port = _free_port()
    log = base / "server.log"
    out = subprocess.run(
        _as_server_user(
            [
                pg_ctl,
                "-D",
                str(data),
                "-l",
                str(log),
                "-w",
                "-t",
                "60",
                "-o",
                f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ]
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    try:
        import psycopg2

        conn = psycopg2.connect(
            host="127.0.0.1", port=port, user="dagster", password=PASSWORD, dbname="postgres"
        )
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE trajforge_dagster")
        conn.close()
        yield {
            "host": "127.0.0.1",
            "port": port,
            "user": "dagster",
            "password": PASSWORD,
            "db": "trajforge_dagster",
        }
    finally:
        subprocess.run(
            _as_server_user([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]),
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(base, ignore_errors=True)


def test_a_materialisation_is_stored_in_postgres(postgres, tmp_path, monkeypatch):
    import psycopg2

    from dagster_project.assets.catalog import task_catalog
    from dagster_project.resources import StorageResource

    for var, key in (
        ("DAGSTER_PG_HOST", "host"),
        ("DAGSTER_PG_PORT", "port"),
        ("DAGSTER_PG_DB", "db"),
        ("DAGSTER_PG_USER", "user"),
        ("DAGSTER_PG_PASSWORD", "password"),
    ):
        monkeypatch.setenv(var, str(postgres[key]))
    production = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    home = tmp_path / "dagster_home"
    home.mkdir()
    # The production storage section as is; the K8s run launcher is checked elsewhere.
    (home / "dagster.yaml").write_text(yaml.safe_dump({"storage": production["storage"]}))
    assert "password" not in (home / "dagster.yaml").read_text().replace("password:\n", "")

    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        result = dg.materialize(
            [task_catalog],
            instance=instance,
            resources={"storage": StorageResource(root=str(tmp_path / "data"))},
            run_config={"ops": {"task_catalog": {"config": {"per_template": 1, "languages": ["en"]}}}},
        )
        assert result.success
    finally:
        instance.dispose()

    conn = psycopg2.connect(
        host=postgres["host"],
        port=postgres["port"],
        user=postgres["user"],
        password=postgres["password"],
        dbname=postgres["db"],
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT status FROM runs WHERE run_id = %s", (result.run_id,))
            assert cur.fetchall() == [("SUCCESS",)]
            cur.execute(
                "SELECT dagster_event_type, count(*) FROM event_logs WHERE run_id = %s "
                "GROUP BY dagster_event_type",
                (result.run_id,),
            )
            events = dict(cur.fetchall())
            cur.execute("SELECT asset_key FROM asset_keys")
            keys = [k for (k,) in cur.fetchall()]
    finally:
        conn.close()
    ev = dg.DagsterEventType
    assert events.get(ev.ASSET_MATERIALIZATION.value) == 1, events
    assert events.get(ev.RUN_SUCCESS.value) == 1 and events.get(ev.STEP_SUCCESS.value) == 1, events
    assert any("task_catalog" in k for k in keys)
