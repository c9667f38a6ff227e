"""GPU training throughput: SFT tokens/s, RL rollouts/s and MFU against the card's measured peak.

One call on a GPU machine, nothing downloaded:

    python benchmarks/train_gpu.py                          # cuda, Qwen2.5-VL-3B-shaped, random bf16
    python benchmarks/train_gpu.py --batch-size 8 --seq-len 4096
    python benchmarks/train_gpu.py --device cpu --tiny      # the tiny model on CPU, < 1 min: plumbing

1. Peak: a bf16 torch.matmul loop (8192^3 by default) gives the card's measured
   peak TFLOP/s (fp32 on CPU); utilisation is quoted against it, not a datasheet.
2. Model: Qwen2.5-VL-3B's shape (36 layers, hidden 2048, its 32-block vision
   tower) built from a config with random weights (tokenizer and processor of the
   offline tiny model), or the tiny model itself with --tiny.
   `--precision mixed` (default, what training.sft does on CUDA): fp32 master
   weights, forward under bf16 autocast, fused AdamW; `--precision bf16`: bf16
   weights trained in place (less memory; small updates round away).
3. SFT: full-parameter AdamW steps on batches of `--batch-size` sequences of
   `--seq-len` tokens (one 1280x800 screenshot in each prompt, an answer with action
   and coordinate spans) with training/loss.py's weighted loss and gradient
   checkpointing on. tokens/s counts every token of the batch.
   MFU = 6 x (language-model parameters x tokens + vision parameters x patches) / s / peak
   (model FLOPs: the recomputation of gradient checkpointing is not counted, as usual).
4. RL: `--prompts` prompts, each sampled `--group-size` times (GRPO's group) for
   exactly `--new-tokens` tokens with the KV cache: rollouts/s and new tokens/s.

Prints a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def peak_matmul_tflops(device: str, dtype, n: int, iters: int) -> float:
    """Measured dense matmul peak: 2 n^3 FLOPs per product, best of three timed loops."""
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(3):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(iters):
            a @ b
        sync(device)
        best = min(best, time.perf_counter() - t0)
    del a, b
    return 2 * n**3 * iters / best / 1e12


def token_ids(processor) -> dict[str, int]:
    vocab = processor.tokenizer.get_vocab()
    return {
        t: vocab[t]
        for t in (
            "<|endoftext|>",
            "<|im_end|>",
            "<|image_pad|>",
            "<|video_pad|>",
            "<|vision_start|>",
            "<|vision_end|>",
        )
    }


def build_model(args, device: str, dtype):
    """(model, processor): the 3B-shaped random model, or the tiny one."""
    import torch
    from transformers import AutoModelForImageTextToText

    from trajforge.vlm.tiny import build_tiny_vlm, default_tiny_dir
    from trajforge.vlm.transformers_backend import load_processor

    try:
        tiny = build_tiny_vlm(default_tiny_dir())
    except OSError:
        tiny = build_tiny_vlm(Path(tempfile.mkdtemp()) / "tiny-qwen2vl")
    processor = load_processor(tiny)
    torch.manual_seed(0)
    if args.tiny:
        model = AutoModelForImageTextToText.from_pretrained(tiny, dtype=dtype).to(device)
    else:
        from transformers import Qwen2_5_VLForConditionalGeneration
        from vlm_batching import qwen25vl_3b_config

        config = qwen25vl_3b_config(token_ids(processor))
        if args.layers:
            config.text_config.num_hidden_layers = args.layers
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=dtype)
    processor.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": args.image_max_pixels}
    return model, processor


def parameter_counts(model) -> dict[str, int]:
    """Language-model parameters that do matmuls (embedding lookup out, lm_head in), vision tower."""
    inner = getattr(model, "model", model)
    visual = getattr(inner, "visual", None)
    lm = getattr(inner, "language_model", None)
    n_vis = sum(p.numel() for p in visual.parameters()) if visual is not None else 0
    emb = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    n_lm = (
        (
            sum(p.numel() for p in lm.parameters())
            if lm is not None
            else sum(p.numel() for p in model.parameters()) - n_vis
        )
        - emb
        + head
    )
    total = sum(p.numel() for p in model.parameters())
    return {"total": total, "language_matmul": n_lm, "vision": n_vis}


def screenshot(width: int, height: int, seed: int) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (245, 245, 245))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, width, height // 10], fill=(20 * (seed % 12), 80, 160))
    for k in range(6):
        y = height // 5 + k * height // 8
        d.rectangle([width // 10, y, width // 2 + 17 * k, y + height // 14], fill=(40, 60 + 30 * k, 40))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def encode_prompts(processor, n: int, width: int, height: int, generation: bool):
    """n prompts (system, user with a screenshot + instruction), same shape each."""
    from PIL import Image

    texts, images = [], []
    for i in range(n):
        messages = [
            {"role": "system", "content": "You are a GUI agent. Think, then act."},
            {
                "role": "user",
                "content": [
                    {"type": "image"},
                    {"type": "text", "text": f"Task {i}: add the blue shirt to the cart and check out."},
                ],
            },
        ]
        texts.append(processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        images.append(Image.open(io.BytesIO(screenshot(width, height, i))).convert("RGB"))
    return processor(text=texts, images=images, return_tensors="pt", padding=generation)


def sft_batch(processor, args, device: str):
    """input_ids, attention_mask, pixel_values, image_grid_thw, labels, weights: the prompt
    (not trained) then random answer tokens up to --seq-len, the last ones weighted as
    action (alpha_a) and coordinates (alpha_g) like a reasoning-set sample."""
    import torch

    enc = encode_prompts(processor, args.batch_size, args.width, args.height, generation=False)
    ids = token_ids(processor)
    prompt = enc["input_ids"]
    answer_len = args.seq_len - prompt.shape[1] - 1
    if answer_len < 32:
        raise SystemExit(
            f"--seq-len {args.seq_len} leaves no room for an answer after a {prompt.shape[1]}-token prompt"
        )
    specials = set(processor.tokenizer.all_special_ids)
    pool = torch.tensor([i for i in range(min(len(processor.tokenizer), 30000)) if i not in specials])
    g = torch.Generator().manual_seed(0)
    answer = pool[torch.randint(len(pool), (args.batch_size, answer_len), generator=g)]
    end = torch.full((args.batch_size, 1), ids["<|im_end|>"])
    input_ids = torch.cat([prompt, answer, end], dim=1)
    labels = input_ids.clone()
    labels[:, : prompt.shape[1]] = -100
    weights = torch.zeros(input_ids.shape, dtype=torch.float32)
    weights[:, prompt.shape[1] :] = 1.0
    weights[:, -25:-1] = args.alpha_action  # the action JSON ...
    weights[:, -15:-5] = args.alpha_coord  # ... and its coordinates
    # M-RoPE needs to know which tokens are image tokens: none of the answer's
    mm_types = torch.cat([enc["mm_token_type_ids"], torch.zeros_like(answer), torch.zeros_like(end)], dim=1)
    batch = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "mm_token_type_ids": mm_types,
        "pixel_values": enc["pixel_values"],
        "image_grid_thw": enc["image_grid_thw"],
        "labels": labels,
        "weights": weights,
    }
    return {k: v.to(device) for k, v in batch.items()}


def bench_sft(model, processor, args, device: str, dtype) -> dict:
    import torch

    from training.loss import weighted_token_loss

    batch = sft_batch(processor, args, device)
    model.train()
    model.config.use_cache = False
    if not args.no_grad_ckpt:
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 name
            model.activation_checkpointing_enable()
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if args.compile:
        from training.compile import compile_blocks

        print(f"compiled {compile_blocks(model)} blocks", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device.startswith("cuda") or None)
    mixed = args.precision == "mixed" and device.startswith("cuda")
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "weights")}
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    losses, times = [], []
    for step in range(args.warmup + args.sft_steps):
        sync(device)
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mixed):
            logits = model(**inputs).logits
        loss, _ = weighted_token_loss(logits, batch["labels"], batch["weights"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
        losses.append(round(float(loss.detach()), 4))
        del logits, loss
    seconds = sum(times)
    tokens = int(batch["attention_mask"].sum()) * args.sft_steps
    patches = int(batch["pixel_values"].shape[0]) * args.sft_steps
    out = {
        "batch_size": args.batch_size,
        "gradient_checkpointing": not args.no_grad_ckpt,
        "compiled": args.compile,
        "seq_len": int(batch["input_ids"].shape[1]),
        "image_tokens_per_sample": int(
            (batch["input_ids"][0] == token_ids(processor)["<|image_pad|>"]).sum()
        ),
        "steps_timed": args.sft_steps,
        "s_per_step": round(seconds / args.sft_steps, 4),
        "tokens_per_s": round(tokens / seconds, 1),
        "losses": losses,
        "tokens": tokens,
        "patches": patches,
        "seconds": seconds,
    }
    if device.startswith("cuda"):
        out["peak_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    del opt
    getattr(model, "activation_checkpointing_disable", model.gradient_checkpointing_disable)()
    return out


def bench_rollouts(model, processor, args, device: str) -> dict:
    import torch

    enc = encode_prompts(processor, args.prompts, args.width, args.height, generation=True)
    enc = {k: v.to(device) for k, v in enc.items()}
    model.eval()
    model.config.use_cache = True
    kw = dict(
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        num_return_sequences=args.group_size,
        pad_token_id=processor.tokenizer.pad_token_id,
    )
    mixed = args.precision == "mixed" and device.startswith("cuda")
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=mixed):
        model.generate(**enc, max_new_tokens=4, min_new_tokens=4, **kw)  # warm-up
        sync(device)
        t0 = time.perf_counter()
        out = model.generate(**enc, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, **kw)
        sync(device)
        seconds = time.perf_counter() - t0
    rollouts = args.prompts * args.group_size
    new = int(out.shape[1] - enc["input_ids"].shape[1])
    return {
        "prompts": args.prompts,
        "group_size": args.group_size,
        "new_tokens": new,
        "prompt_tokens": int(enc["input_ids"].shape[1]),
        "rollouts": rollouts,
        "seconds": round(seconds, 3),
        "rollouts_per_s": round(rollouts / seconds, 2),
        "new_tokens_per_s": round(rollouts * new / seconds, 1),
    }


def table(result: dict) -> str:
    s, r = result["sft"], result["rl"]
    rows = [
        ("device", result["device_name"]),
        ("precision", f"{result['precision']} (weights {result['dtype']})"),
        ("model", f"{result['model']} ({result['params']['total'] / 1e9:.3g}B params)"),
        ("peak matmul (measured)", f"{result['peak_tflops']:.3g} TFLOP/s"),
        ("SFT batch", f"{s['batch_size']} x {s['seq_len']} tokens ({s['image_tokens_per_sample']} image)"),
        ("SFT step", f"{s['s_per_step']:.3f} s"),
        ("SFT tokens/s", f"{s['tokens_per_s']:,.0f}"),
        ("SFT achieved", f"{result['sft_tflops']:.3g} TFLOP/s"),
        ("MFU (vs measured peak)", f"{100 * result['mfu']:.1f} %"),
        (
            "RL rollouts/s",
            f"{r['rollouts_per_s']:.2f} ({r['prompts']} prompts x G={r['group_size']}, "
            f"{r['new_tokens']} new tokens)",
        ),
        ("RL new tokens/s", f"{r['new_tokens_per_s']:,.0f}"),
    ]
    if "peak_memory_gb" in s:
        rows.append(("SFT peak memory", f"{s['peak_memory_gb']} GiB"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the tiny model, small sizes (CPU check)")
    ap.add_argument(
        "--precision",
        choices=["mixed", "bf16"],
        default="mixed",
        help="mixed: fp32 master weights + bf16 autocast (the trainer's default); "
        "bf16: bf16 weights in place",
    )
    ap.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile each transformer block (training.compile); the warm-up steps compile",
    )
    ap.add_argument(
        "--no-grad-ckpt",
        action="store_true",
        help="keep every activation (faster, more memory) instead of recomputing them",
    )
    ap.add_argument("--layers", type=int, default=0, help="override the text layers (0 = 36)")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--seq-len", type=int, default=None)
    ap.add_argument("--sft-steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--image-size", default="1280x800")
    ap.add_argument("--image-max-pixels", type=int, default=None)
    ap.add_argument("--matmul-size", type=int, default=None)
    ap.add_argument("--alpha-action", type=float, default=2.0)
    ap.add_argument("--alpha-coord", type=float, default=4.0)
    args = ap.parse_args(argv)
    # full size: what one H100/H200 holds with full-parameter AdamW and checkpointing
    defaults = (
        {
            "batch_size": 2,
            "seq_len": 256,
            "sft_steps": 3,
            "prompts": 2,
            "matmul_size": 512,
            "image_max_pixels": 28 * 28 * 16,
        }
        if args.tiny
        else {
            "batch_size": 4,
            "seq_len": 2048,
            "sft_steps": 6,
            "prompts": 8,
            "matmul_size": 8192,
            "image_max_pixels": 512 * 28 * 28,
        }
    )
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.width, args.height = (int(v) for v in args.image_size.split("x"))
    return args


def main(argv=None) -> dict:
    import torch

    args = parse_args(argv)
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --device cpu --tiny for the plumbing check")
    peak_dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    dtype = torch.bfloat16 if device.startswith("cuda") and args.precision == "bf16" else torch.float32
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    t_start = time.perf_counter()
    peak = peak_matmul_tflops(
        device, peak_dtype, args.matmul_size, iters=50 if device.startswith("cuda") else 5
    )
    print(f"peak matmul {args.matmul_size}^3 {str(peak_dtype)[6:]}: {peak:.3g} TFLOP/s", flush=True)
    model, processor = build_model(args, device, dtype)
    params = parameter_counts(model)
    print(f"model: {params['total'] / 1e9:.3g}B parameters", flush=True)
    sft = bench_sft(model, processor, args, device, dtype)
    sft_flops = 6 * (params["language_matmul"] * sft["tokens"] + params["vision"] * sft["patches"])
    sft_tflops = sft_flops / sft.pop("seconds") / 1e12
    rl = bench_rollouts(model, processor, args, device)
    result = {
        "device": device,
        "device_name": name,
        "dtype": str(dtype).replace("torch.", ""),
        "precision": args.precision if device.startswith("cuda") else "fp32",
        "torch": torch.__version__,
        "model": "tiny-qwen2vl" if args.tiny else "qwen2.5-vl-3b-shape (random)",
        "params": params,
        "peak_tflops": round(peak, 4),
        "sft": sft,
        "sft_tflops": round(sft_tflops, 5),
        "mfu": round(sft_tflops / peak, 4),
        "rl": rl,
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    print(table(result))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
