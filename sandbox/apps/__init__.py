"""The sandbox apps. Each module defines SPEC, an AppSpec.

An app is a Flask blueprint plus `initial_state(lang, seed)`, a pure function
that builds the session's seeded data (products, posts, mails...). Templates
live in templates/<app>/<lang>/: the Chinese pages have their own layouts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import Blueprint


@dataclass(frozen=True)
class AppSpec:
    name: str
    blueprint: Blueprint
    initial_state: Callable[[str, int], dict]
    title: dict  # {"en": "...", "zh": "..."}
    # "web": desktop-first pages; "mobile": touch-first pages (gestures, bottom
    # sheets, phone interruptions) crawled on phones through Appium.
    form: str = "web"


def _load() -> dict[str, AppSpec]:
    """Every module of this package is an app and must define SPEC."""
    import importlib
    import pkgutil

    specs = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        spec = importlib.import_module(f"{__name__}.{info.name}").SPEC
        specs[spec.name] = spec
    return specs


APPS: dict[str, AppSpec] = _load()
WEB_APPS: list[str] = sorted(n for n, a in APPS.items() if a.form == "web")
MOBILE_APPS: list[str] = sorted(n for n, a in APPS.items() if a.form == "mobile")
