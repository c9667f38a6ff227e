"""TransformersBackend: batched greedy generation equals one-by-one generation."""

from __future__ import annotations

import pytest
import torch

from trajforge.vlm.backend_config import backend_from_config
from trajforge.vlm.backends import VLMBackend, VLMRequest
from trajforge.vlm.messages import image_part, split_images, text_part
from trajforge.vlm.transformers_backend import TransformersBackend, resolve_dtype

from .helpers import screenshot, tiny_backend, tiny_model_path

MAX_NEW = 8


def mixed_requests() -> list[VLMRequest]:
    """Six requests of very different lengths: text only, one image, two images of
    different sizes; given in an order that is not sorted by length."""
    reqs = []
    for i, (words, sizes) in enumerate(
        [
            (9, [(320, 200)]),
            (1, []),
            (20, [(200, 300), (640, 400)]),
            (4, [(120, 90)]),
            (14, []),
            (2, [(500, 500), (90, 160)]),
        ]
    ):
        content = [text_part("Task: " + " ".join(["add the blue shirt"] * words))]
        content += [image_part(screenshot(w, h, f"r{i}", seed=i)) for w, h in sizes]
        reqs.append(
            VLMRequest(
                [
                    {"role": "system", "content": "You judge GUI trajectories."},
                    {"role": "user", "content": content},
                ],
                key=f"r{i}",
            )
        )
    return reqs


def reference_one_by_one(backend: TransformersBackend, reqs: list[VLMRequest]) -> list[str]:
    """transformers itself, one request at a time: processor + model.generate."""
    out = []
    for r in reqs:
        messages, images = split_images(r.messages)
        prompt = backend.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        enc = backend.processor(text=[prompt], images=images or None, return_tensors="pt")
        with torch.no_grad():
            ids = backend.model.generate(**enc, max_new_tokens=MAX_NEW, do_sample=False)
        out.append(backend.tokenizer.decode(ids[0, enc["input_ids"].shape[1] :], skip_special_tokens=True))
    return out


def test_batched_greedy_equals_one_by_one_in_callers_order():
    backend = tiny_backend(4)
    reqs = mixed_requests()
    lengths = [backend.encode(r)["input_ids"].shape[1] for r in reqs]
    assert lengths != sorted(lengths) and len(set(lengths)) == len(lengths)  # mixed, unsorted

    batched = backend.generate(reqs, MAX_NEW)
    reference = reference_one_by_one(backend, reqs)
    assert batched == reference
    assert len(set(reference)) > 1  # the outputs differ per request, so order is really checked
    # A reordered call returns the same answers, reordered.
    assert backend.generate(reqs[::-1], MAX_NEW) == reference[::-1]


def test_samples_n_per_request_reproducibly():
    backend = tiny_backend(4)
    reqs = mixed_requests()[:3]
    a = backend.generate(reqs, 6, temperature=1.5, n=3, seed=7)
    b = backend.generate(reqs, 6, temperature=1.5, n=3, seed=7)
    assert a == b and len(a) == 3 and all(len(s) == 3 for s in a)
    assert any(len(set(s)) > 1 for s in a)  # sampling, not greedy
    with pytest.raises(ValueError, match="temperature"):
        backend.generate(reqs, 6, n=2)


def test_model_id_config_and_protocol():
    backend = backend_from_config({"kind": "transformers", "path": str(tiny_model_path()), "batch_size": 2})
    assert isinstance(backend, VLMBackend)
    assert backend.device == "cpu" and backend.dtype == torch.float32  # auto on a machine without CUDA
    assert backend.model_id.startswith("tiny-qwen2vl@") and len(backend.model_id.split("@")[1]) == 8
    assert resolve_dtype("auto", "cuda") == torch.bfloat16
    with pytest.raises(ValueError, match="kind"):
        backend_from_config({"kind": "vllm"})
    with pytest.raises(ValueError, match=r"messages\[1\].content\[0\]"):
        VLMRequest(
            [
                {"role": "system", "content": "x"},
                {"role": "user", "content": [{"type": "image", "image": b""}]},
            ]
        )


def test_seeded_sampling_from_several_threads_is_what_each_gets_alone():
    """Rollouts on a pool's threads share one backend (training.rollouts with pool=): each
    seeded call must sample what it samples alone, though torch's RNG is the process's."""
    from concurrent.futures import ThreadPoolExecutor

    backend = tiny_backend(4)
    reqs = mixed_requests()[:2]
    seeds = list(range(12))
    alone = {s: backend.generate(reqs, 12, temperature=1.5, seed=s) for s in seeds}
    assert len({tuple(v) for v in alone.values()}) > 1  # the seeds give different samples
    with ThreadPoolExecutor(4) as ex:
        together = dict(
            zip(seeds, ex.map(lambda s: backend.generate(reqs, 12, temperature=1.5, seed=s), seeds))
        )
    assert together == alone
