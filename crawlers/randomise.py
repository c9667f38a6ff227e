"""Domain randomisation: the screen, theme and text size of an episode, from a seed.

A model trained on one window size and one theme learns the window, not the
task. Each episode draws a device profile, a light or dark theme and a font
scale from its seed (so a re-run draws the same), and the trajectory's
DeviceProfile records all of it.
"""

from __future__ import annotations

import random

from schemas.records import DeviceProfile, episode_seed  # noqa: F401 (episode_seed: re-exported)

DEVICE_PROFILES: dict[str, DeviceProfile] = {
    "desktop": DeviceProfile(
        name="desktop", viewport_width=1280, viewport_height=800, pixel_ratio=1.0, is_mobile=False
    ),
    "laptop": DeviceProfile(
        name="laptop", viewport_width=1440, viewport_height=900, pixel_ratio=1.0, is_mobile=False
    ),
    # Tablets and phones are touch devices: WebEnv turns touch on with is_mobile.
    "tablet": DeviceProfile(
        name="tablet", viewport_width=820, viewport_height=1180, pixel_ratio=2.0, is_mobile=True
    ),
    "phone": DeviceProfile(
        name="phone", viewport_width=390, viewport_height=844, pixel_ratio=3.0, is_mobile=True
    ),
}

# Phones for mobile crawls through Appium (CSS viewport x device pixel ratio =
# the real screen): a Pixel 8 (1080x2400), an iPhone 15 (1179x2556) and a large
# Chinese Android phone (1440x3120, the 6.8" class of Xiaomi/OPPO/vivo flagships).
MOBILE_PROFILES: dict[str, DeviceProfile] = {
    "pixel_8": DeviceProfile(
        name="pixel_8", viewport_width=412, viewport_height=915, pixel_ratio=2.625, is_mobile=True
    ),
    "iphone_15": DeviceProfile(
        name="iphone_15", viewport_width=393, viewport_height=852, pixel_ratio=3.0, is_mobile=True
    ),
    "cn_android_large": DeviceProfile(
        name="cn_android_large", viewport_width=480, viewport_height=1040, pixel_ratio=3.0, is_mobile=True
    ),
}

THEMES = ("light", "dark")
FONT_SCALES = (0.9, 1.0, 1.15, 1.3)
LOCALES = {"en": "en-US", "zh": "zh-CN"}


def randomise(
    seed: int, lang: str, *, profiles: dict[str, DeviceProfile] | None = None
) -> tuple[DeviceProfile, str, float]:
    """(device, theme, font_scale) drawn from `seed`; the locale follows `lang`."""
    if lang not in LOCALES:
        raise ValueError(f"unknown language {lang!r}; expected one of {sorted(LOCALES)}")
    profiles = DEVICE_PROFILES if profiles is None else profiles
    rng = random.Random(f"randomise:{seed}")
    base = profiles[rng.choice(sorted(profiles))]
    theme = rng.choice(THEMES)
    font_scale = rng.choice(FONT_SCALES)
    device = base.model_copy(update={"locale": LOCALES[lang], "theme": theme, "font_scale": font_scale})
    return device, theme, font_scale


def profile_for_task(seed: int, task_id: str, names) -> str:
    """The device profile (one of `names`) a task is crawled on, drawn from its seed.

    Mobile crawls are partitioned by app x profile: each partition takes the
    tasks that draw its profile, so every task lands on exactly one phone.
    """
    names = sorted(names)
    if not names:
        raise ValueError("profile_for_task: no profile names given")
    return random.Random(f"profile:{episode_seed(seed, task_id)}").choice(names)


def fixed(name: str, lang: str, theme: str = "light", font_scale: float = 1.0) -> DeviceProfile:
    """A named profile without randomisation (tests, benchmarks)."""
    return DEVICE_PROFILES[name].model_copy(
        update={"locale": LOCALES[lang], "theme": theme, "font_scale": font_scale}
    )
