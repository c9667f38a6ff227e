"""A local VLM through transformers' Auto classes (Qwen2-VL, Qwen2.5-VL, Qwen3-VL).

Each request is run through the processor on its own (exact token count, images
decoded once), requests are sorted by length into batches of `batch_size`, and a
batch is left-padded and generated together; results come back in the caller's
order. Greedy by default; `temperature > 0` samples, `n` samples per request.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from functools import cache
from pathlib import Path

import torch
from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

from trajforge.vlm.backends import VLMRequest, check_sampling
from trajforge.vlm.messages import split_images

log = logging.getLogger(__name__)

# Keys of a processor's output that are per token (left-padded) rather than per image
# patch (concatenated).
_TOKEN_KEYS = {"input_ids": "pad", "attention_mask": 0, "mm_token_type_ids": 0, "token_type_ids": 0}


_VISION_TOKEN_FIELDS = (
    "image_token_id",
    "video_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "vision_token_id",
)


def vision_token_ids(model) -> list[int]:
    """The image/video placeholder and frame tokens of the model's config. They are never
    sampled: one in a completion would claim image features that do not exist (the
    forward pass fails on the count). A trained model gives them ~0 probability."""
    ids = set()
    for cfg in (model.config, getattr(model.config, "text_config", None)):
        for name in _VISION_TOKEN_FIELDS:
            value = getattr(cfg, name, None) if cfg is not None else None
            if isinstance(value, int):
                ids.add(value)
    return sorted(ids)


@cache
def image_only_processor_class(base: type) -> type:
    """`base` (a Qwen*-VL processor) without its video processor.

    Their video processors need torchvision; a processor class whose __init__ does
    not name `video_processor` is built from an image processor and a tokenizer.
    """

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        base.__init__(self, image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    # Same name as the base: save_pretrained records it as processor_class, so a
    # machine with torchvision loads the full processor from the same directory.
    return type(base.__name__, (base,), {"__init__": __init__, "__doc__": f"{base.__name__} without video."})


def load_processor(path: str | Path):
    """AutoProcessor, or (without torchvision) the same processor minus video."""
    try:
        processor = AutoProcessor.from_pretrained(path)
        if hasattr(processor, "image_processor"):
            return processor
        first_error = TypeError(f"AutoProcessor gave a {type(processor).__name__} (no image processor)")
    except Exception as exc:  # noqa: BLE001 - any failure here gets the fallback, then a clear error
        first_error = exc
    try:
        import json

        import transformers

        cfg_file = Path(path) / "processor_config.json"
        name = json.loads(cfg_file.read_text()).get("processor_class") if cfg_file.exists() else None
        base = getattr(transformers, name or "Qwen2VLProcessor")
        image_processor = AutoImageProcessor.from_pretrained(path, backend="pil")
        tokenizer = AutoTokenizer.from_pretrained(path)
        template = getattr(tokenizer, "chat_template", None)
        tmpl_file = Path(path) / "chat_template.jinja"
        if tmpl_file.exists():
            template = tmpl_file.read_text()
        return image_only_processor_class(base)(
            image_processor=image_processor, tokenizer=tokenizer, chat_template=template
        )
    except Exception as exc:  # noqa: BLE001
        raise RuntimeError(
            f"{path}: cannot load a processor (AutoProcessor: {first_error!r}; image-only fallback: {exc!r})"
        ) from exc


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def resolve_dtype(dtype: str | torch.dtype, device: str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


def model_id_for(path: str | Path) -> str:
    """Directory name plus a short hash of config.json: two different random
    checkpoints saved under the same name still get different ids."""
    p = Path(path)
    digest = hashlib.sha256((p / "config.json").read_bytes()).hexdigest()[:8]
    return f"{p.resolve().name}@{digest}"


_SEEDED_GENERATE = threading.Lock()


class TransformersBackend:
    def __init__(
        self,
        path: str | Path,
        device: str = "auto",
        dtype: str | torch.dtype = "auto",
        batch_size: int = 8,
        max_image_pixels: int | None = None,
        model=None,
        processor=None,
    ):
        """`model`/`processor` may be passed in already built (the benchmark's random
        3B-shaped model); otherwise both are loaded from `path`."""
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.path = Path(path)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.batch_size = batch_size
        self.max_image_pixels = max_image_pixels
        self.processor = processor if processor is not None else load_processor(path)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        if model is None:
            model = AutoModelForImageTextToText.from_pretrained(path, dtype=self.dtype)
        self.model = model.to(self.device).eval()
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self._model_id = model_id_for(path) if (self.path / "config.json").exists() else self.path.name

    @classmethod
    def from_loaded(
        cls,
        model,
        processor,
        model_id: str,
        *,
        device: str | None = None,
        batch_size: int = 1,
        max_image_pixels: int | None = None,
    ) -> TransformersBackend:
        """A backend over a model already in memory (a policy being trained).

        The model is used as it is: not moved, not cast and not switched to eval
        mode (the trainer owns it); `device` defaults to the model's, the dtype is
        the model's. `model_id` names it (a checkpoint id) in provenance.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self = cls.__new__(cls)
        param = next(model.parameters())
        self.path = Path(model_id)
        self.device = device or str(param.device)
        self.dtype = param.dtype
        self.batch_size = batch_size
        self.max_image_pixels = max_image_pixels
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.tokenizer.padding_side = "left"
        self.model = model
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self._model_id = model_id
        return self

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return (
            f"TransformersBackend(model_id={self.model_id!r}, device={self.device!r}, "
            f"dtype={self.dtype}, batch_size={self.batch_size})"
        )

    # -- preparation ---------------------------------------------------------------
    def encode(self, request: VLMRequest) -> dict[str, torch.Tensor]:
        """The processor's tensors for one request (batch of one, unpadded)."""
        messages, images = split_images(request.messages, self.max_image_pixels)
        prompt = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        enc = self.processor(text=[prompt], images=images or None, return_tensors="pt")
        return dict(enc)

    def collate(self, encodings: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Left-pad the per-token tensors, concatenate the per-patch ones."""
        width = max(e["input_ids"].shape[1] for e in encodings)
        batch: dict[str, torch.Tensor] = {}
        keys = dict.fromkeys(k for e in encodings for k in e)  # a text-only request has no pixels
        for key in keys:
            tensors = [e[key] for e in encodings if key in e]
            if key in _TOKEN_KEYS:
                fill = self.pad_id if _TOKEN_KEYS[key] == "pad" else _TOKEN_KEYS[key]
                rows = [
                    torch.cat([torch.full((1, width - t.shape[1]), fill, dtype=t.dtype), t], dim=1)
                    for t in tensors
                ]
                batch[key] = torch.cat(rows, dim=0)
            else:
                batch[key] = torch.cat(tensors, dim=0)
        return batch

    # -- generation ------------------------------------------------------------------
    def generate(
        self,
        requests: list[VLMRequest],
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        n: int = 1,
        seed: int | None = None,
    ) -> list[str] | list[list[str]]:
        """One text per request (n == 1) or a list of n samples per request."""
        check_sampling(n, temperature)
        encodings = [self.encode(r) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: encodings[i]["input_ids"].shape[1])
        results: list[list[str] | None] = [None] * len(requests)
        sample_kw = (
            {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
            if temperature > 0
            else {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
        )
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = {k: v.to(self.device) for k, v in self.collate([encodings[i] for i in idx]).items()}
            if "pixel_values" in batch:
                batch["pixel_values"] = batch["pixel_values"].to(self.dtype)
            t0 = time.perf_counter()
            # torch's RNG is the process's: episodes playing on a pool's threads take turns
            # from the seed to the end of sampling, so a batch's samples depend on its seed only
            with _SEEDED_GENERATE, torch.inference_mode():
                if seed is not None:
                    torch.manual_seed(seed + start)
                out = self.model.generate(
                    **batch,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=n,
                    pad_token_id=self.pad_id,
                    suppress_tokens=vision_token_ids(self.model) or None,
                    **sample_kw,
                )
            texts = self.tokenizer.batch_decode(
                out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True
            )
            for j, i in enumerate(idx):
                results[i] = texts[j * n : (j + 1) * n]
            log.debug(
                "generated batch of %d (width %d) in %.2fs",
                len(idx),
                batch["input_ids"].shape[1],
                time.perf_counter() - t0,
            )
        if n == 1:
            return [r[0] for r in results]
        return results
