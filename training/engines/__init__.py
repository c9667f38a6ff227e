"""Training engines: what `trajforge train` and the training assets launch.

An engine turns a `TrainRequest` (the kind, the set, the model, the output folder,
the cluster size) into a `Launch`: the exact command, the configuration files it
reads, the interpreter (the venv the engine lives in) and its environment.
`plan()` imports no engine, so `--dry-run` and the config checks run anywhere;
`Launch.write()` puts the files in place before the command runs.

Engines: builtin (the small dependency-light loop of training/: sft, rl, online and
eval, each a plan of its own), trl, swift, llamafactory, verl, easyr1 (sft or rl). Each lives in `training/engines/<name>.py`
with `plan(request) -> Launch`; one whose module is absent is not offered.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("builtin", "trl", "swift", "llamafactory", "verl", "easyr1")
KINDS = ("sft", "rl", "online", "eval")  # online and eval: the builtin engine's only
SET_KINDS = ("sft", "rl")  # kinds that train on a set
# Where each engine's interpreter is by default (its pins clash with the project's);
# $TRAJFORGE_PYTHON_<ENGINE> (e.g. TRAJFORGE_PYTHON_SWIFT) points elsewhere.
VENVS = {
    "builtin": None,
    "trl": None,
    "swift": ".venv-trainers",
    "verl": ".venv-trainers",
    "easyr1": ".venv-trainers",
    "llamafactory": ".venv-llamafactory",
}


class EngineError(ValueError):
    """A request an engine cannot take (unknown engine, kind it does not train, bad option)."""


@dataclass(frozen=True)
class TrainRequest:
    kind: str  # sft | rl | online | eval
    set_dir: Path | None  # a reasoning (or grounding) set: a shard folder with manifest.json
    model: str  # a local model directory, or "tiny"
    out: Path  # where configs, converted data and the checkpoint go
    gpus: int = 1  # per node
    nodes: int = 1
    max_steps: int | None = None
    options: dict = field(default_factory=dict)  # engine fields (`--set key=value`)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise EngineError(f"kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if self.set_dir is None and self.kind in SET_KINDS:
            raise EngineError(f"kind {self.kind}: needs a set (a shard folder)")
        if self.gpus < 0 or self.nodes < 1:
            raise EngineError(f"gpus {self.gpus} / nodes {self.nodes}: need gpus >= 0 and nodes >= 1")


@dataclass(frozen=True)
class Conversion:
    """A set the engine reads in another trainer format: `trajforge train` and the training
    assets convert it (trajforge.convert.ensure_converted) before the command, unless `out`
    already holds the conversion of this version of the set."""

    set_dir: Path
    format: str  # a trajforge.convert format: trl, swift, llamafactory, verl, easyr1
    out: Path

    def __str__(self) -> str:
        return f"convert {self.set_dir} to {self.format} under {self.out} (unless it holds this version)"


@dataclass
class Launch:
    engine: str
    kind: str
    argv: list[str]  # the exact command
    files: dict[str, str] = field(default_factory=dict)  # path relative to the request's out -> text
    env: dict[str, str] = field(default_factory=dict)  # added to the environment
    cwd: Path = ROOT
    notes: list[str] = field(default_factory=list)  # what the dry run should say besides
    conversions: list[Conversion] = field(default_factory=list)  # done by the caller first
    # Other steps before the command (lay out a model folder): (what, function);
    # `--dry-run` only lists them, `prepare()` runs them.
    steps: list[tuple[str, Callable[[], None]]] = field(default_factory=list)
    # An engine whose process cannot report through Dagster Pipes (not trajforge's code):
    # the folder its Hugging Face Trainer writes trainer_state.json under, read after the
    # run for the loss, tokens/s and checkpoint path (training.engines.trainer_state).
    state_dir: Path | None = None

    def write(self, out: Path) -> list[Path]:
        """Write the configuration files under `out`; their paths. (The conversions are the
        caller's: trajforge.convert.ensure_converted, which this layer does not import.)"""
        written = []
        for rel, text in self.files.items():
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
        return written

    def prepare(self) -> None:
        for _, step in self.steps:
            step()

    def describe(self, out: Path) -> str:
        """What `--dry-run` prints: the environment, the command, then each file."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        lines = [f"# engine {self.engine}, {self.kind}", f"cd {shlex.quote(str(self.cwd))}"]
        lines.append((env + " " if env else "") + shlex.join(self.argv))
        lines += [f"# {n}" for n in self.notes]
        lines += [f"# before the command: {c}" for c in self.conversions]
        lines += [f"# before the command: {what}" for what, _ in self.steps]
        for rel, text in self.files.items():
            lines += ["", f"# --- {out / rel} ---", text.rstrip("\n")]
        return "\n".join(lines) + "\n"


def python_for(engine: str) -> str:
    """The interpreter an engine runs under: $TRAJFORGE_PYTHON_<ENGINE>, its venv, or this one."""
    override = os.environ.get(f"TRAJFORGE_PYTHON_{engine.upper()}")
    if override:
        return override
    venv = VENVS.get(engine)
    return sys.executable if venv is None else str(ROOT / venv / "bin" / "python")


def available() -> list[str]:
    """The engines whose module exists in this checkout."""
    return [e for e in ENGINES if importlib.util.find_spec(f"training.engines.{e}") is not None]


def plan(engine: str, request: TrainRequest) -> Launch:
    if engine not in ENGINES:
        raise EngineError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if engine not in available():
        raise EngineError(
            f"engine {engine!r} is not built in this version (available: {', '.join(available())})"
        )
    module = importlib.import_module(f"training.engines.{engine}")
    return module.plan(request)


def tiny_model_view(view: Path) -> Path:
    """The tiny model as ms-swift and LLaMA-Factory load it: links to its files plus
    preprocessor_config.json (the image processor's settings, which a real Qwen2-VL
    checkpoint carries and their processor loaders need for the video processor; the
    tiny model is saved without it)."""
    from training.config import resolve_model_path

    source = resolve_model_path("tiny")
    view.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        link = view / f.name
        if not link.exists():
            link.symlink_to(f.resolve())
    config = view / "preprocessor_config.json"
    if not config.exists():
        image = json.loads((source / "processor_config.json").read_text())["image_processor"]
        config.write_text(json.dumps(image, indent=2) + "\n")
    return view


# The per-node settings of a multi-node torchrun launch, as --option key=value or $KEY.
MULTI_NODE = ("node_rank", "master_addr", "master_port")


def torchrun_env(request: TrainRequest, given: dict) -> dict[str, str]:
    """The torchrun environment of an engine's launcher (ms-swift's `swift`, LLaMA-Factory's
    FORCE_TORCHRUN): processes per node, nodes and, across nodes, this node's rank and the
    master's address (a clear error naming the option when one is missing)."""
    env = {"NPROC_PER_NODE": str(max(request.gpus, 1)), "NNODES": str(request.nodes)}
    if request.nodes > 1:
        for key in MULTI_NODE:
            value = given.get(key, os.environ.get(key.upper()))
            if value is None and key != "master_port":
                raise EngineError(
                    f"--nodes {request.nodes}: set --option {key}=... (or ${key.upper()}) for this node"
                )
            if value is not None:
                env[key.upper()] = str(value)
    return env
