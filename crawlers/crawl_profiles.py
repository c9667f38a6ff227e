"""Which device profile an episode runs on: drawn from the crawl seed, or the leased device's.

Without a pool (or with a pool of browsers, which can emulate any profile),
each episode draws its profile from its seed; with a DevicePool, the leased
phone is the profile. Either way theme and font scale come from the seed.
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas.records import DeviceProfile, Task

from .episode import CrawlEnv, env_platform
from .randomise import DEVICE_PROFILES, MOBILE_PROFILES, episode_seed, profile_for_task, randomise


def is_mobile_task(task: Task, env: CrawlEnv | None = None, mobile_apps: Iterable[str] = ()) -> bool:
    """A task of one of `mobile_apps` (the environment provider's phone apps), or any
    task played in a mobile env."""
    return task.app in set(mobile_apps) or (env is not None and env_platform(env) != "web")


def profiles_for(task: Task, devices: list[str] | None, *, mobile: bool) -> dict[str, DeviceProfile]:
    """The device profiles a task's episode may draw (without a pool).

    Mobile tasks draw from MOBILE_PROFILES, the others from DEVICE_PROFILES;
    `devices` narrows either family to the names it lists.
    """
    family = MOBILE_PROFILES if mobile else DEVICE_PROFILES
    if devices is None:
        return family
    chosen = {name: family[name] for name in devices if name in family}
    if not chosen:
        kind = "mobile" if mobile else "web"
        raise ValueError(
            f"task {task.task_id}: devices={devices!r} names no {kind} profile "
            f"(expected some of {sorted(family)})"
        )
    return chosen


def draw_device(
    seed: int, task: Task, profiles: dict[str, DeviceProfile], *, mobile: bool
) -> tuple[DeviceProfile, str, float]:
    """(device, theme, font_scale) of a task's episode, fixed by the crawl seed.

    A mobile task gets the phone that `profile_for_task` gives it (the one the
    mobile partitions use), so its profile is the same with or without a pool;
    theme and font scale are then drawn as for any episode.
    """
    ep_seed = episode_seed(seed, task.task_id)
    if mobile:
        name = profile_for_task(seed, task.task_id, profiles)
        profiles = {name: profiles[name]}
    return randomise(ep_seed, task.language, profiles=profiles)


def check_devices(devices: list[str] | None, pool) -> None:
    """`devices` names known profiles and, with a pool of fixed devices, includes theirs."""
    if devices is None:
        return
    known = set(DEVICE_PROFILES) | set(MOBILE_PROFILES)
    unknown = sorted(set(devices) - known)
    if unknown or not devices:
        raise ValueError(
            f"devices={devices!r}: expected names from {sorted(DEVICE_PROFILES)} "
            f"(web) or {sorted(MOBILE_PROFILES)} (mobile)"
        )
    # A pool of browsers (profiles None) emulates whatever the seed draws.
    if pool is not None and pool.profiles is not None:
        missing = sorted(set(pool.profiles) - set(devices))
        if missing:
            raise ValueError(
                f"devices={devices!r} leaves out the pool's profile(s) {missing}: "
                "with a pool, every episode runs on the leased device's profile"
            )
