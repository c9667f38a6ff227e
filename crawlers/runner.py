"""The crawl's generic parts, re-exported for callers that import them from one place.

An environment's crawl is crawlers.env_crawl.crawl_environment; the sandbox's
own crawl (its catalog, templates and server) is sandbox.crawl.crawl, built on
the same episode loop, attempts and pools.
"""
from __future__ import annotations

from .crawl_browser_pool import WebEnvPool
from .crawl_episode import TERMINAL, CrawlEnv, EpisodeInfo, element_at, env_platform
from .crawl_profiles import draw_device, is_mobile_task, profiles_for
from .crawl_tasks import CrawlStats, ProgressEvent
from .env_runtime import StartPageError
from .randomise import episode_seed

__all__ = ["CrawlEnv", "CrawlStats", "ProgressEvent", "EpisodeInfo", "StartPageError",
           "TERMINAL", "WebEnvPool", "draw_device", "episode_seed", "element_at",
           "env_platform", "is_mobile_task", "profiles_for"]
