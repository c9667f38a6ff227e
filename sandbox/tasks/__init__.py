"""Every task template of the sandbox, and the task catalog built from them."""

from __future__ import annotations

import importlib
import pkgutil

from schemas.records import Task

from .base import OracleError, PlanOracle, TaskTemplate  # noqa: F401


def _load() -> dict[str, TaskTemplate]:
    """Each module (one per app) lists its templates in TEMPLATES."""
    out: dict[str, TaskTemplate] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in ("base",) or info.name.startswith("_"):
            continue
        for t in importlib.import_module(f"{__name__}.{info.name}").TEMPLATES:
            if t.template_id in out:
                raise ValueError(f"duplicate template id {t.template_id}")
            out[t.template_id] = t
    return out


TEMPLATES: dict[str, TaskTemplate] = _load()


def get_template(template_id: str) -> TaskTemplate:
    try:
        return TEMPLATES[template_id]
    except KeyError:
        raise KeyError(f"unknown task template {template_id!r}") from None


def make_task(template_id: str, language: str, seed: int) -> Task:
    """One template's task (the `make_task` that trajforge.tasks.seeds.reseeded takes)."""
    return get_template(template_id).make_task(language, seed)


def build_catalog(
    per_template: int = 1, languages=("en", "zh"), seed: int = 0, apps: list[str] | None = None
) -> list[Task]:
    """`per_template` tasks of each template in each language, seeds from `seed`."""
    tasks = []
    for tid in sorted(TEMPLATES):
        t = TEMPLATES[tid]
        if apps is not None and t.app not in apps:
            continue
        for lang in languages:
            if lang not in t.languages:
                continue
            for i in range(per_template):
                tasks.append(t.make_task(lang, seed + i))
    return tasks
