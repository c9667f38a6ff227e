"""Domain randomisation: the screen, theme and text size of an episode, from a seed.

A model trained on one window size and one theme learns the window, not the
task. Each episode draws a device profile, a light or dark theme and a font
scale from its seed (so a re-run draws the same), and the trajectory's
DeviceProfile records all of it.
"""
from __future__ import annotations

import hashlib
import random

from schemas.records import DeviceProfile

DEVICE_PROFILES: dict[str, DeviceProfile] = {
    "desktop": DeviceProfile(name="desktop", viewport_width=1280, viewport_height=800,
                             pixel_ratio=1.0, is_mobile=False),
    "laptop": DeviceProfile(name="laptop", viewport_width=1440, viewport_height=900,
                            pixel_ratio=1.0, is_mobile=False),
    # Tablets and phones are touch devices: WebEnv turns touch on with is_mobile.
    "tablet": DeviceProfile(name="tablet", viewport_width=820, viewport_height=1180,
                            pixel_ratio=2.0, is_mobile=True),
    "phone": DeviceProfile(name="phone", viewport_width=390, viewport_height=844,
                           pixel_ratio=3.0, is_mobile=True),
}

THEMES = ("light", "dark")
FONT_SCALES = (0.9, 1.0, 1.15, 1.3)
LOCALES = {"en": "en-US", "zh": "zh-CN"}


def episode_seed(*parts) -> int:
    """A 63-bit seed from any parts (crawl seed, task id...), stable across runs.

    Python's hash() is salted per process, so it cannot be used here.
    """
    raw = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(raw).digest()[:8], "big") >> 1


def randomise(seed: int, lang: str, *, profiles: dict[str, DeviceProfile] | None = None
              ) -> tuple[DeviceProfile, str, float]:
    """(device, theme, font_scale) drawn from `seed`; the locale follows `lang`."""
    if lang not in LOCALES:
        raise ValueError(f"unknown language {lang!r}; expected one of {sorted(LOCALES)}")
    profiles = DEVICE_PROFILES if profiles is None else profiles
    rng = random.Random(f"randomise:{seed}")
    base = profiles[rng.choice(sorted(profiles))]
    theme = rng.choice(THEMES)
    font_scale = rng.choice(FONT_SCALES)
    device = base.model_copy(update={"locale": LOCALES[lang], "theme": theme,
                                     "font_scale": font_scale})
    return device, theme, font_scale


def fixed(name: str, lang: str, theme: str = "light", font_scale: float = 1.0) -> DeviceProfile:
    """A named profile without randomisation (tests, benchmarks)."""
    return DEVICE_PROFILES[name].model_copy(update={"locale": LOCALES[lang], "theme": theme,
                                                    "font_scale": font_scale})
