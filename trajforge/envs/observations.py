"""What a GuiEnv returns of a screen: the observation dict and the elements of info.

Observation (a dict): `screenshot` (uint8 H x W x 3, the screen in the env's
fixed frame), `a11y` (the accessibility tree as text), `instruction` (the
task's, or the one the app made up through `instruction_js`) and `url`.
info["elements"]: index, role, name, bbox x0, y0, x1, y1 in screenshot pixels,
visibility, for prompting with marks.
"""

from __future__ import annotations

import io

import numpy as np
from gymnasium import spaces
from PIL import Image

from crawlers.episode import EnvEpisode
from schemas.observation import Observation
from schemas.records import Element

from .spaces import AnyText, screenshot_space
from .wire import png_size

A11Y_MAX_CHARS = 200_000
TEXT_MAX_CHARS = 8_192
_CLIPPED = " …(clipped)"


def observation_space(width: int, height: int) -> spaces.Dict:
    return spaces.Dict(
        {
            "screenshot": screenshot_space(width, height),
            "a11y": AnyText(A11Y_MAX_CHARS),
            "instruction": AnyText(TEXT_MAX_CHARS),
            "url": AnyText(TEXT_MAX_CHARS),
        }
    )


def observation_of(obs: Observation, instruction: str, screen_size: tuple[int, int], decode: bool) -> dict:
    """The observation dict of `obs`; its screenshot None only where `decode` is False and
    the captured PNG is the screenshot already (a server sends that PNG as is)."""
    decodes = decode or obs.image_format != "png" or png_size(obs.screenshot) != screen_size
    return {
        "screenshot": pixels(obs, screen_size) if decodes else None,
        "a11y": _clip(obs.a11y_tree or "", A11Y_MAX_CHARS),
        "instruction": _clip(instruction, TEXT_MAX_CHARS),
        "url": _clip(obs.url or "", TEXT_MAX_CHARS),
    }


def copied(observation: dict) -> dict:
    """The same observation as new objects (gymnasium's checker wants fresh data each call)."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in observation.items()}


def pixels(obs: Observation, screen_size: tuple[int, int]) -> np.ndarray:
    image = Image.open(io.BytesIO(obs.screenshot)).convert("RGB")
    if image.size != screen_size:
        image = image.resize(screen_size, Image.Resampling.BILINEAR)
    return np.array(image, dtype=np.uint8)


def element_info(e: Element, screen_size: tuple[int, int], index: int | None = None) -> dict:
    width, height = screen_size
    box = None
    if e.bbox is not None:
        x0, y0, x1, y1 = e.bbox
        box = [round(x0 * width, 1), round(y0 * height, 1), round(x1 * width, 1), round(y1 * height, 1)]
    out = {"role": e.role, "name": e.name, "bbox": box}
    out["visibility"] = e.visibility.model_dump() if e.visibility is not None else None
    if index is not None:
        out = {"index": index, **out}
    return out


def elements_info(elements: list[Element], screen_size: tuple[int, int]) -> list[dict]:
    return [element_info(e, screen_size, i) for i, e in enumerate(elements)]


def verdict_info(episode: EnvEpisode) -> dict | None:
    v = episode.verdict
    if episode.verifier_error is not None:
        return {"error": episode.verifier_error}
    if v is None:
        return None
    return {"done": v.done, "success": v.success, "reward": v.reward, "reason": v.reason, "kind": v.kind}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_CLIPPED)] + _CLIPPED
