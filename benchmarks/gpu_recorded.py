"""Rows of the GPU benchmarks recorded on a GPU machine, for a table made without one.

`benchmarks/gpu_checks.sh` runs train_gpu.py and vlm_batching.py on a GPU machine;
their JSON results are kept in benchmarks/results/gpu-*.jsonl (one line per run:
script, args, recorded date, machine, result). `make bench` on a machine without
CUDA reports these rows, each marked as recorded (date, card), instead of "not
run"; with CUDA, train_gpu.py runs live and replaces them.
"""

from __future__ import annotations

import json
from pathlib import Path

from common import Row

RESULTS = Path(__file__).resolve().parent / "results"


def recorded_runs(results_dir: Path = RESULTS) -> list[dict]:
    runs = []
    for path in sorted(results_dir.glob("gpu-*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    runs.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}:{n}: not JSON ({e})") from None
    return runs


def _find(runs: list[dict], script: str, *flags: str, absent: tuple[str, ...] = ()) -> dict | None:
    for r in runs:
        args = r["args"].split()
        if r["script"] == script and all(f in args for f in flags) and not any(a in args for a in absent):
            return r
    return None


def _machine(run: dict) -> str:
    return f"{run['machine'].split(' (')[0]}, recorded {run['recorded']}"


def recorded_rows(results_dir: Path = RESULTS) -> list[Row]:
    """Rows from the recorded runs: MFU per precision, checkpointing's cost, rollouts, batching."""
    runs = recorded_runs(results_dir)
    rows: list[Row] = []
    mixed = _find(runs, "train_gpu", "mixed", absent=("--no-grad-ckpt", "--batch-size", "--compile"))
    bf16 = _find(runs, "train_gpu", "bf16")
    nockpt = _find(runs, "train_gpu", "mixed", "--no-grad-ckpt", absent=("--compile",))
    compiled = _find(runs, "train_gpu", "mixed", "--compile", absent=("--no-grad-ckpt",))
    fastest = _find(runs, "train_gpu", "mixed", "--compile", "--no-grad-ckpt")
    for run, what in (
        (mixed, "fp32 master weights + bf16 autocast (the trainer's default), gradient checkpointing"),
        (nockpt, "mixed precision, no gradient checkpointing"),
        (bf16, "bf16 weights in place, gradient checkpointing"),
        (fastest, "mixed precision, compiled blocks, no gradient checkpointing"),
    ):
        if run is None:
            continue
        r, s = run["result"], run["result"]["sft"]
        rows.append(
            Row(
                "train_gpu",
                f"GPU SFT, {r['model']}, {what}: achieved TFLOP/s (ratio = MFU)",
                r["sft_tflops"],
                r["peak_tflops"],
                "TFLOP/s",
                "measured bf16 matmul peak, same card",
                note=f"batch {s['batch_size']} x {s['seq_len']} tokens; {s['tokens_per_s']:,.0f} "
                f"tokens/s; peak memory {s.get('peak_memory_gb')} GiB; "
                f"`train_gpu.py {run['args']}`",
                machine=_machine(run),
            )
        )
    if mixed and nockpt:
        a, b = nockpt["result"]["sft"], mixed["result"]["sft"]
        rows.append(
            Row(
                "train_gpu",
                "GPU SFT tokens/s without gradient checkpointing",
                a["tokens_per_s"],
                b["tokens_per_s"],
                "tokens/s",
                "with checkpointing (default on CUDA)",
                note=f"memory {a.get('peak_memory_gb')} vs {b.get('peak_memory_gb')} GiB",
                machine=_machine(nockpt),
            )
        )
    for run, base, what in (
        (compiled, mixed, "with checkpointing"),
        (fastest, nockpt, "without checkpointing"),
    ):
        if run and base:
            a, b = run["result"]["sft"], base["result"]["sft"]
            rows.append(
                Row(
                    "train_gpu",
                    f"GPU SFT tokens/s, blocks compiled (training.compile), {what}",
                    a["tokens_per_s"],
                    b["tokens_per_s"],
                    "tokens/s",
                    "eager (the default)",
                    note=f"`compile: true`; memory {a.get('peak_memory_gb')} vs {b.get('peak_memory_gb')} GiB",
                    machine=_machine(run),
                )
            )
    if mixed and bf16:
        a, b = mixed["result"]["rl"], bf16["result"]["rl"]
        rows.append(
            Row(
                "train_gpu",
                "GPU RL rollouts/s, fp32 policy under bf16 autocast",
                a["rollouts_per_s"],
                b["rollouts_per_s"],
                "rollouts/s",
                "bf16 weights",
                note=f"{a['prompts']} prompts x G={a['group_size']}, {a['new_tokens']} new tokens, KV cache",
                machine=_machine(mixed),
            )
        )
    for run in (r for r in runs if r["script"] == "vlm_batching"):
        r = run["result"]
        rows.append(
            Row(
                "train_gpu",
                f"VLM batching on GPU: batch {r['batch_size']} vs one by one "
                f"({r['model_id']}, {r['dtype'].replace('torch.', '')})",
                r["requests"] / r["seconds_batched"],
                r["requests"] / r["seconds_one_by_one"],
                "requests/s",
                "one request at a time",
                note=f"{r['requests']} requests, {r['max_new_tokens']} new tokens each; "
                f"`vlm_batching.py {run['args']}`",
                machine=_machine(run),
            )
        )
    return rows
