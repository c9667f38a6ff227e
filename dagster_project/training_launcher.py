"""Run an engine's Launch (training.engines.plan: its command and its files) through Dagster Pipes.

Three kinds, chosen by configuration (`kind`, else $TRAJFORGE_TRAIN_LAUNCHER, else
"subprocess"):

- subprocess: PipesSubprocessClient on this machine (CPU, the tiny mode, a
  single GPU workstation). The Launch's files (configurations) are written into
  the run's training directory and its command reads them from there.
- k8s: PipesK8sClient starts a GPU pod from `image`; messages come back through
  the pod's logs. The pod mounts a PersistentVolumeClaim (shards in, checkpoints
  out) at `mount_path`; every path under the local data root in the command and
  the files is rewritten to that mount, and each file travels in an environment
  variable (the Dagster run worker need not mount the volume). Credentials come
  from a Kubernetes Secret named in `env_secret` (envFrom): never values in config.
- ray: the command runs as a Ray task on a node of the cluster at `ray_address`
  (else $TRAJFORGE_RAY_ADDRESS, else "auto") that has `ray_num_cpus` and
  `ray_num_gpus` free (training/ray_command.py): verl's trainer then joins that
  cluster for its workers; torchrun engines take the node's GPUs. The node shares
  the data root and the image's paths (a shared volume), so Pipes' context travels
  in the environment and its messages in a file under the run's training folder.

The training process reports loss, reward, KL and success rate with
`report_asset_materialization` (training/pipes_report.py), which
`get_materialize_result()` turns into this asset's MaterializeResult.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from training.engines import Launch

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER_ENV = "TRAJFORGE_TRAIN_LAUNCHER"
KINDS = ("subprocess", "k8s", "ray")


class K8sToleration(dg.Config):
    """A pod toleration, e.g. key nvidia.com/gpu, operator Exists, effect NoSchedule."""

    key: str = ""
    operator: str = "Exists"  # Exists | Equal
    value: str = ""
    effect: str = ""  # NoSchedule | PreferNoSchedule | NoExecute ("" = all)


class TrainingLauncher(dg.ConfigurableResource):
    """Where training runs: a local subprocess (default), a GPU pod on Kubernetes or a
    node of a Ray cluster."""

    kind: str = ""  # subprocess | k8s | ray ("" = $TRAJFORGE_TRAIN_LAUNCHER or subprocess)
    # subprocess
    python: str = ""  # interpreter ("" = this one)
    # k8s
    image: str = ""  # an image with the repo and its venv installed
    pod_python: str = "python"
    nproc_per_node: int = 1  # > 1: torchrun --standalone for training.sft (DDP, one pod)
    namespace: str = ""  # "" = the current namespace (or "default")
    gpus: int = 1  # nvidia.com/gpu limit
    cpu: str = "8"
    memory: str = "64Gi"
    shm_size: str = "16Gi"  # /dev/shm for dataloader workers and NCCL
    node_selector: dict[str, str] = {}
    tolerations: list[K8sToleration] = []
    pvc_name: str = ""  # shards and checkpoints
    mount_path: str = "/data"  # where the PVC is mounted in the pod (its TRAJFORGE_DATA)
    service_account: str = ""
    env_secret: str = ""  # a Secret whose keys become env vars (HF_TOKEN, S3 keys...)
    pod_wait_timeout_s: float = 86400.0
    # ray
    ray_address: str = ""  # "" = $TRAJFORGE_RAY_ADDRESS, else "auto"
    ray_num_cpus: float = 1.0
    ray_num_gpus: float = 0.0  # torchrun engines: the GPUs of one node; verl's driver: 0

    @property
    def resolved_kind(self) -> str:
        kind = self.kind or os.environ.get(LAUNCHER_ENV, "") or "subprocess"
        if kind not in KINDS:
            raise ValueError(f"TrainingLauncher.kind (or ${LAUNCHER_ENV}): {kind!r} is not one of {KINDS}")
        return kind

    def run_launch(
        self,
        context: dg.AssetExecutionContext,
        launch: Launch,
        *,
        out: Path,
        data_root: Path,
        extras: Mapping[str, Any] | None = None,
    ) -> dg.MaterializeResult:
        """Run an engine's Launch (training.engines.plan) under Pipes: its files written under
        `out`, the set converted to the engine's format where it asks (kept while the set is
        unchanged), its other steps, then its argv with its env in its cwd; what the process reported."""
        from trajforge.convert import ensure_converted

        launch.write(out)
        for c in launch.conversions:
            if ensure_converted(c.set_dir, c.format, c.out) is not None:
                context.log.info(f"converted {c.set_dir} to {c.format} under {c.out}")
        launch.prepare()
        kind = self.resolved_kind
        context.log.info(f"training with engine {launch.engine} via {kind}: {shlex.join(launch.argv)}")
        env = {**child_env(data_root), **launch.env}
        if kind == "subprocess":
            client = dg.PipesSubprocessClient(cwd=str(launch.cwd), env=env)
            started = time.time()
            result = client.run(
                command=list(launch.argv), context=context, extras=dict(extras or {})
            ).get_materialize_result()
            return with_trainer_state(result, launch, started)
        if kind == "ray":
            started = time.time()
            result = self._on_ray(
                context, list(launch.argv), env=env, cwd=launch.cwd, run_dir=out, extras=extras
            )
            return with_trainer_state(result, launch, started)

        from dagster_k8s import PipesK8sClient

        if not self.image:
            raise ValueError("TrainingLauncher(kind='k8s') needs an image")
        command, pod_env = launch_pod_command(launch, out, self.pod_python, str(data_root), self.mount_path)
        return (
            PipesK8sClient()
            .run(
                context=context,
                image=self.image,
                namespace=self.namespace or None,
                command=command,
                env={**pod_env, **launch.env, "TRAJFORGE_DATA": self.mount_path},
                base_pod_spec=build_pod_spec(self),
                extras=dict(extras or {}),
                pod_wait_timeout=self.pod_wait_timeout_s,
            )
            .get_materialize_result()
        )

    def _on_ray(
        self,
        context: dg.AssetExecutionContext,
        command: list[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        run_dir: Path,
        extras: Mapping[str, Any] | None,
    ) -> dg.MaterializeResult:
        """Run the command on a Ray node under a Pipes session: the context in its
        environment, its messages through a file under `run_dir` (shared with the node)."""
        from training.ray_command import run_on_ray

        run_dir.mkdir(parents=True, exist_ok=True)
        messages = run_dir / f"pipes-{context.run.run_id}.jsonl"
        log = run_dir / f"ray-{context.run.run_id}.log"
        address = self.ray_address or os.environ.get("TRAJFORGE_RAY_ADDRESS") or None
        with dg.open_pipes_session(
            context=context,
            context_injector=dg.PipesEnvContextInjector(),
            message_reader=dg.PipesFileMessageReader(str(messages)),
            extras=dict(extras or {}),
        ) as session:
            status, node, said = run_on_ray(
                command,
                env={**env, **session.get_bootstrap_env_vars()},
                cwd=str(cwd),
                log_path=log,
                address=address,
                num_cpus=self.ray_num_cpus,
                num_gpus=self.ray_num_gpus,
            )
            context.log.info(f"ran on Ray node {node}; its output: {log}")
            if status != 0:
                raise dg.Failure(
                    f"{shlex.join(command)} exited with status {status} on Ray node {node} "
                    f"(output: {log}): {said[-1000:]}"
                )
        result = dg.PipesClientCompletedInvocation(session).get_materialize_result()
        return with_metadata(result, {**(result.metadata or {}), "ray_node_id": node, "launcher": "ray"})


def with_trainer_state(result: dg.MaterializeResult, launch: Launch, started: float) -> dg.MaterializeResult:
    """An engine that reported nothing through Pipes (ms-swift, LLaMA-Factory: not trajforge's
    code) has its figures read from its Trainer's trainer_state.json of this run (written
    after `started`): losses, steps, tokens/s, checkpoint path; metrics_source says so."""
    if launch.state_dir is None or "losses" in (result.metadata or {}):
        return result
    from training.engines.trainer_state import NoTrainerState, trainer_metrics
    from training.pipes_report import flat_metadata

    try:
        metrics = trainer_metrics(launch.state_dir, since=started)
    except NoTrainerState as exc:
        raise dg.Failure(f"engine {launch.engine}: {exc}") from None
    metrics = {"engine": launch.engine, **metrics, "metrics_source": "trainer_state.json"}
    return with_metadata(result, {**flat_metadata(metrics), **(result.metadata or {})})


def with_metadata(result: dg.MaterializeResult, metadata: Mapping[str, Any]) -> dg.MaterializeResult:
    """The same result (checks, data version) with `metadata` instead of its own."""
    return dg.MaterializeResult(
        metadata=dict(metadata), check_results=result.check_results, data_version=result.data_version
    )


def child_env(data_root: Path) -> dict[str, str]:
    """What a training process needs on top of its environment: the data root, and the
    repository on its import path."""
    return {
        "TRAJFORGE_DATA": str(data_root),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


def launch_pod_command(
    launch: Launch, out: Path, python: str, local_root: str, pod_root: str
) -> tuple[list[str], dict[str, str]]:
    """(command, env) of a pod that runs an engine's Launch: each of its files travels in an
    env var and is written at its path under the mount, then the argv is exec'd with the
    pod's interpreter and paths. The converted data must already be on the volume (the run
    worker shares it)."""
    env, writes = {}, []
    for i, (rel, text) in enumerate(launch.files.items()):
        name = f"TRAJFORGE_TRAIN_FILE_{i}"
        env[name] = rewrite_text(text, local_root, pod_root)
        path = shlex.quote(rewrite_text(str(out / rel), local_root, pod_root))
        writes.append(f'mkdir -p "$(dirname {path})" && printf "%s" "${name}" > {path}')
    # the engine's interpreter (the first word, or the one a shell line execs) is the pod's
    shell = list(launch.argv[:2]) == ["/bin/sh", "-c"]
    interpreter = shlex.split(launch.argv[2])[1] if shell else launch.argv[0]
    run = launch.argv[2] if shell else "exec " + shlex.join(launch.argv)
    run = rewrite_text(run.replace(shlex.quote(interpreter), shlex.quote(python), 1), local_root, pod_root)
    return ["/bin/sh", "-c", " && ".join([*writes, run])], env


def rewrite_text(text: str, local_root: str, pod_root: str) -> str:
    """Every occurrence of the local data root in a text (a config, a command) moved to the mount."""
    local_root = local_root.rstrip("/")
    return text.replace(local_root + "/", pod_root.rstrip("/") + "/")


def build_pod_spec(cfg: TrainingLauncher) -> dict:
    """The base pod spec (Kubernetes camelCase) for a training pod: one container
    (PipesK8sClient sets its image, command and the Pipes env) with GPU limits,
    the data PVC, a memory-backed /dev/shm, node selector, tolerations, service
    account and env from a Secret. Pure: no cluster needed."""
    resources = {"cpu": cfg.cpu, "memory": cfg.memory}
    limits = dict(resources)
    if cfg.gpus:
        limits["nvidia.com/gpu"] = str(cfg.gpus)
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": cfg.shm_size}}]
    if cfg.pvc_name:
        mounts.append({"name": "data", "mountPath": cfg.mount_path})
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": cfg.pvc_name}})
    container: dict[str, Any] = {
        "name": "train",
        "resources": {"requests": resources, "limits": limits},
        "volumeMounts": mounts,
    }
    if cfg.env_secret:
        container["envFrom"] = [{"secretRef": {"name": cfg.env_secret}}]
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container], "volumes": volumes}
    if cfg.node_selector:
        spec["nodeSelector"] = dict(cfg.node_selector)
    if cfg.tolerations:
        spec["tolerations"] = [
            {
                k: v
                for k, v in (
                    ("key", t.key),
                    ("operator", t.operator),
                    ("value", t.value),
                    ("effect", t.effect),
                )
                if v
            }
            for t in cfg.tolerations
        ]
    if cfg.service_account:
        spec["serviceAccountName"] = cfg.service_account
    return spec


def metadata_value(result: dg.MaterializeResult, key: str, default: Any = None) -> Any:
    """A reported metadata entry's plain value (Pipes gives MetadataValue objects)."""
    value = (result.metadata or {}).get(key, default)
    value = getattr(value, "value", value)
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
