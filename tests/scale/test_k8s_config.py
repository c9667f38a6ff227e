"""The production Kubernetes configuration, checked with Dagster's own config validation.

deploy/dagster.yaml is validated as a whole instance config, its run launcher
section against K8sRunLauncher's schema, deploy/k8s_executor.yaml against
k8s_job_executor's schema; a misspelt key fails each check.
"""

from __future__ import annotations

import copy
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster_k8s import K8sRunLauncher, k8s_job_executor

from dagster_project.production import DEFAULT_K8S_EXECUTOR_CONFIG, k8s_executor_config, production_executor

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ENV = {
    "TRAJFORGE_K8S_NAMESPACE": "trajforge",
    "DAGSTER_PG_HOST": "pg",
    "DAGSTER_PG_PORT": "5432",
    "DAGSTER_PG_DB": "dagster",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "x",
}


@pytest.fixture
def env(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)


def _launcher_config() -> dict:
    return yaml.safe_load((DEPLOY / "dagster.yaml").read_text())["run_launcher"]


def _errors(config_type, value) -> list[str]:
    result = process_config(config_type, value)
    return [] if result.success else [e.message for e in result.errors]


def test_the_instance_yaml_is_valid_dagster_instance_config(env):
    config, _ = dagster_instance_config(str(DEPLOY))
    assert config["run_launcher"]["class"] == "K8sRunLauncher"
    assert config["run_launcher"]["module"] == "dagster_k8s"
    assert set(config["storage"]) == {"postgres"}
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"


def test_the_instance_yaml_holds_no_secret_value():
    doc = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    pg = doc["storage"]["postgres"]["postgres_db"]
    for key in ("hostname", "port", "db_name", "username", "password"):
        assert set(pg[key]) == {"env"}, key  # from the environment only
    assert "trajforge-vlm" in doc["run_launcher"]["config"]["env_secrets"]


def test_run_launcher_section_against_k8s_run_launcher_schema(env):
    launcher = _launcher_config()
    assert _errors(K8sRunLauncher.config_type(), launcher["config"]) == []
    typo = copy.deepcopy(launcher["config"])
    typo["job_namepsace"] = typo.pop("job_namespace")
    errors = _errors(K8sRunLauncher.config_type(), typo)
    assert any("job_namepsace" in e for e in errors), errors
    singular = copy.deepcopy(launcher["config"])
    singular["env_secret"] = singular.pop("env_secrets")
    assert any("env_secret" in e for e in _errors(K8sRunLauncher.config_type(), singular))
    wrong_type = {**launcher["config"], "fail_pod_on_run_failure": "yes"}
    assert _errors(K8sRunLauncher.config_type(), wrong_type)


def test_executor_config_against_k8s_job_executor_schema(tmp_path):
    config = k8s_executor_config(DEFAULT_K8S_EXECUTOR_CONFIG)
    assert _errors(k8s_job_executor.config_schema.config_type, config) == []
    assert config["max_concurrent"] >= 1 and "web_trajectories" in config["per_step_k8s_config"]
    doc = yaml.safe_load(DEFAULT_K8S_EXECUTOR_CONFIG.read_text())
    doc["execution"]["config"]["max_concurent"] = doc["execution"]["config"].pop("max_concurrent")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=r"bad\.yaml.*max_concurent"):
        k8s_executor_config(bad)


def test_production_executor_wires_the_checked_k8s_config_into_a_job():
    executor = production_executor({"TRAJFORGE_EXECUTOR": "k8s", "TRAJFORGE_MAX_CONCURRENT": "3"})
    assert executor.name == "k8s_job_executor"

    @dg.asset
    def one() -> int:
        return 1

    job = dg.Definitions(assets=[one], executor=executor).resolve_implicit_global_asset_job_def()
    assert job.executor_def is executor
    # What Dagster resolves for the executor: the checked file, the env's cap on top.
    resolved = executor.config_schema.resolve_config({})
    assert resolved.success
    applied = resolved.value["config"]
    assert applied["max_concurrent"] == 3
    crawl = applied["per_step_k8s_config"]["web_trajectories"]["container_config"]
    checked = k8s_executor_config(DEFAULT_K8S_EXECUTOR_CONFIG)["per_step_k8s_config"]
    assert crawl == checked["web_trajectories"]["container_config"]


def _run_job(launcher_config: dict, step_config: dict | None = None):
    """The Kubernetes Job dagster-k8s builds for a run (or a step) from this config:
    dagster_k8s's own builder turns every volume, mount and pod field into a
    kubernetes client model, so an unknown Kubernetes field fails here."""
    from dagster_k8s.job import DagsterK8sJobConfig, UserDefinedDagsterK8sConfig, construct_dagster_k8s_job

    cfg = process_config(K8sRunLauncher.config_type(), launcher_config).value
    job_config = DagsterK8sJobConfig(
        job_image="registry.example.com/trajforge:test",
        dagster_home=cfg["dagster_home"],
        image_pull_policy=cfg.get("image_pull_policy"),
        service_account_name=cfg.get("service_account_name"),
        instance_config_map=cfg["instance_config_map"],
        postgres_password_secret=cfg.get("postgres_password_secret"),
        env_config_maps=cfg.get("env_config_maps"),
        env_secrets=cfg.get("env_secrets"),
        volume_mounts=cfg.get("volume_mounts"),
        volumes=cfg.get("volumes"),
        resources=cfg.get("resources"),
    )
    user = UserDefinedDagsterK8sConfig.from_dict(
        step_config if step_config is not None else cfg.get("run_k8s_config", {})
    )
    return construct_dagster_k8s_job(
        job_config, ["dagster", "api", "execute_run"], "dagster-run-test", user_defined_k8s_config=user
    )


def test_run_and_crawl_step_pods_build_into_kubernetes_jobs(env):
    job = _run_job(_launcher_config()["config"])
    pod = job.spec.template.spec
    container = pod.containers[0]
    assert {v.name for v in pod.volumes} >= {"trajforge-data", "dshm"}
    assert {m.mount_path for m in container.volume_mounts} >= {"/data", "/dev/shm"}
    sources = {(s.config_map_ref or s.secret_ref).name for s in container.env_from}
    assert {"trajforge-env", "trajforge-vlm"} <= sources  # settings and the key, by reference
    assert pod.service_account_name == "trajforge-runs"
    crawl = k8s_executor_config(DEFAULT_K8S_EXECUTOR_CONFIG)["per_step_k8s_config"]["web_trajectories"]
    step = _run_job(_launcher_config()["config"], crawl).spec.template.spec
    assert step.containers[0].resources.limits["memory"] == "16Gi"
    assert any(v.empty_dir is not None and v.empty_dir.medium == "Memory" for v in step.volumes)
    # A misspelt Kubernetes field in the pod config is refused by the builder.
    bad = copy.deepcopy(_launcher_config()["config"])
    bad["run_k8s_config"]["pod_spec_config"]["volumes"][0]["emptyDirr"] = bad["run_k8s_config"][
        "pod_spec_config"
    ]["volumes"][0].pop("emptyDir")
    with pytest.raises(Exception, match="emptyDirr"):
        _run_job(bad)
