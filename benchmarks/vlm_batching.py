"""Batched vs one-by-one VLM generation throughput through TransformersBackend.

Default: the tiny random Qwen2-VL on CPU, 32 judge-like requests (one screenshot
each, prompts of mixed length), batch 16 against batch 1. Each request generates
exactly --max-new-tokens tokens (EOS suppressed) so both runs do the same work.

    python benchmarks/vlm_batching.py                      # tiny model, CPU, ~1 min
    python benchmarks/vlm_batching.py --device cuda --random-config 3b --batch-size 16
    python benchmarks/vlm_batching.py --model /models/Qwen2.5-VL-3B-Instruct --device cuda

`--random-config 3b` builds a Qwen2.5-VL-3B-shaped model with random weights in
memory (tokenizer and processor from the tiny model): real-size compute, no
download. Prints one JSON line with the figures last.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trajforge.vlm.backends import VLMRequest  # noqa: E402
from trajforge.vlm.messages import image_part, text_part  # noqa: E402
from trajforge.vlm.tiny import build_tiny_vlm, default_tiny_dir  # noqa: E402

WORDS = (
    "tap the button Add to cart then type blue shirt into Search and scroll down "
    "to the checkout page and confirm the order"
).split()


def qwen25vl_3b_config(ids: dict[str, int]):
    """Qwen2.5-VL-3B-Instruct's shape (config.json of the release), our token ids."""
    from transformers import Qwen2_5_VLConfig

    return Qwen2_5_VLConfig(
        text_config={
            "vocab_size": 151936,
            "hidden_size": 2048,
            "intermediate_size": 11008,
            "num_hidden_layers": 36,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "max_position_embeddings": 128000,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 2048,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [7, 15, 23, 31],
            "tokens_per_second": 2,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )


def make_requests(n: int, width: int, height: int) -> list[VLMRequest]:
    import io

    from PIL import Image, ImageDraw

    reqs = []
    for i in range(n):
        img = Image.new("RGB", (width, height), (245, 245, 245))
        d = ImageDraw.Draw(img)
        d.rectangle([0, 0, width, height // 10], fill=(20 * (i % 12), 80, 160))
        d.rectangle([width // 8, height // 3, width // 2, height // 3 + 40 + i], fill=(40, 120, 40))
        buf = io.BytesIO()
        img.save(buf, "PNG")
        words = " ".join(WORDS[j % len(WORDS)] for j in range(8 + (i * 7) % 40))  # mixed lengths
        reqs.append(
            VLMRequest(
                [
                    {"role": "system", "content": "You judge GUI-agent trajectories."},
                    {
                        "role": "user",
                        "content": [text_part(f"Task {i}: {words}"), image_part(buf.getvalue())],
                    },
                ],
                key=f"r{i}",
            )
        )
    return reqs


def build_backend(args, batch_size: int):
    import torch

    from trajforge.vlm.transformers_backend import (
        TransformersBackend,
        load_processor,
        resolve_device,
        resolve_dtype,
    )

    if not args.random_config:
        return TransformersBackend(
            args.model,
            device=args.device,
            dtype=args.dtype,
            batch_size=batch_size,
            max_image_pixels=args.max_image_pixels,
        )
    if not hasattr(args, "_model"):
        from transformers import Qwen2_5_VLForConditionalGeneration

        processor = load_processor(args.model)
        processor.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": args.max_image_pixels}
        vocab = processor.tokenizer.get_vocab()
        ids = {
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
        device = resolve_device(args.device)
        dtype = resolve_dtype(args.dtype, device)
        torch.manual_seed(0)
        t0 = time.perf_counter()
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration._from_config(qwen25vl_3b_config(ids), dtype=dtype)
        print(
            f"random 3B-shaped model: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters, "
            f"built in {time.perf_counter() - t0:.1f}s",
            flush=True,
        )
        args._model, args._processor = model, processor
    return TransformersBackend(
        Path(f"random-{args.random_config}"),
        device=args.device,
        dtype=args.dtype,
        batch_size=batch_size,
        max_image_pixels=args.max_image_pixels,
        model=args._model,
        processor=args._processor,
    )


def timed(backend, reqs, max_new_tokens) -> float:
    import torch

    if backend.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    backend.generate(reqs, max_new_tokens)
    if backend.device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", type=Path, default=None, help="model dir (default: the tiny model, built if needed)"
    )
    ap.add_argument("--random-config", choices=["3b"], default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--image-size", default="1280x800")
    ap.add_argument(
        "--max-image-pixels",
        type=int,
        default=None,
        help="downscale screenshots to this many pixels (default: the processor's own cap; "
        "401408 = 512 image tokens with --random-config)",
    )
    args = ap.parse_args(argv)
    if args.model is None:
        try:
            args.model = build_tiny_vlm(default_tiny_dir())
        except OSError:
            args.model = build_tiny_vlm(Path(tempfile.mkdtemp()) / "tiny-qwen2vl")
    if args.random_config and args.max_image_pixels is None:
        args.max_image_pixels = 512 * 28 * 28
    width, height = (int(v) for v in args.image_size.split("x"))
    reqs = make_requests(args.requests, width, height)

    results = {}
    for bs in (1, args.batch_size):
        backend = build_backend(args, bs)
        backend.model.generation_config.min_new_tokens = None
        backend.generate(reqs[: min(bs, 2)], 2)  # warm-up
        backend.model.generation_config.min_new_tokens = args.max_new_tokens  # equal work per request
        seconds = timed(backend, reqs, args.max_new_tokens)
        results[bs] = seconds
        print(
            f"batch {bs:>3}: {len(reqs)} requests in {seconds:.2f}s = {len(reqs) / seconds:.2f} req/s, "
            f"{len(reqs) * args.max_new_tokens / seconds:.1f} new tok/s",
            flush=True,
        )
    ratio = results[1] / results[args.batch_size]
    summary = {
        "model_id": backend.model_id,
        "device": backend.device,
        "dtype": str(backend.dtype),
        "requests": len(reqs),
        "max_new_tokens": args.max_new_tokens,
        "batch_size": args.batch_size,
        "seconds_one_by_one": round(results[1], 3),
        "seconds_batched": round(results[args.batch_size], 3),
        "speedup": round(ratio, 2),
    }
    print(f"speedup batch {args.batch_size} vs one-by-one: {ratio:.2f}x")
    print(json.dumps(summary))
    return summary


# run_all's sizes (full: the documented CPU run)
SIZES = {
    "smoke": ["--requests", "2", "--batch-size", "2", "--max-new-tokens", "2", "--image-size", "320x200"],
    "quick": ["--requests", "16", "--batch-size", "8", "--max-new-tokens", "8"],
    "full": ["--requests", "32", "--batch-size", "16", "--max-new-tokens", "16"],
}


def run(mode: str):
    """run_all's entry: the figures as a table row."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import Row, machine_short, pick

    s = main(pick(mode, SIZES))
    n = s["requests"]
    return [
        Row(
            "vlm_batching",
            f"VLM batching: batch {s['batch_size']} vs one by one ({s['device']})",
            n / s["seconds_batched"],
            n / s["seconds_one_by_one"],
            "requests/s",
            "one request at a time",
            target=">= 4",
            note=f"{n} requests of one screenshot, {s['max_new_tokens']} new tokens each, {s['model_id']}",
            machine=machine_short(),
        )
    ]


if __name__ == "__main__":
    main()
