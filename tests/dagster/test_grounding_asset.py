"""grounding_set in a real in-process Dagster run: raw_steps -> curated_steps ->
grounding_set, its four blocking checks evaluated on the shards; an English-only crawl
fails the language mix (and blocks)."""

from __future__ import annotations

import dagster as dg
import pytest

from dagster_project.assets.curate import curated_steps
from dagster_project.assets.grounding import CHECKS_OF, GROUNDING_CHECKS, grounding_set
from dagster_project.assets.raw import raw_steps
from dagster_project.resources import StorageResource, VLMResource
from tests.synthesis.grounding_fixtures import build_grounding_store

pytestmark = pytest.mark.slow
ASSETS = [raw_steps, curated_steps, grounding_set, *GROUNDING_CHECKS]
RUN = {"ops": {"curated_steps": {"config": {"min_steps": 1, "drop_failed": False}}}}


def _run(data, languages):
    build_grounding_store(data / "raw", collection="web", languages=languages)
    return dg.materialize(
        ASSETS,
        resources={"storage": StorageResource(root=str(data)), "vlm": VLMResource(kind="none")},
        run_config=RUN,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def test_grounding_set_materialises_and_its_checks_pass_then_fail_on_one_language(tmp_path):
    result = _run(tmp_path / "both", ("en", "zh"))
    assert result.success
    evals = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evals) == {f"grounding_set_{n}" for n in CHECKS_OF}
    assert all(e.passed for e in evals.values()), {k: e.metadata for k, e in evals.items()}
    meta = result.asset_materializations_for_node("grounding_set")[0].metadata
    assert meta["languages"].value == {"en": 40, "zh": 40}
    assert meta["samples_per_unique_screen"].value >= 15
    assert meta["dropped"].value["modal_covered"] > 0 and meta["dropped"].value["off_screen"] > 0

    en = _run(tmp_path / "en", ("en",))
    evals = {e.check_name: e for e in en.get_asset_check_evaluations()}
    assert not evals["grounding_set_language_mix"].passed
    assert "zh" in evals["grounding_set_language_mix"].metadata["detail"].value
    assert evals["grounding_set_points_in_boxes"].passed


def test_grounding_set_from_real_crawled_steps(tmp_path):
    """The sandbox crawled by real Chromium (visibility measured at capture), curated,
    then grounding_set: every check passes and each unique screen gives >= 15 samples."""
    from sandbox.crawl import SandboxCrawl, crawl
    from sandbox.server import SandboxServer
    from sandbox.tasks import TEMPLATES
    from trajforge.store.raw import RawStore

    data = tmp_path / "data"
    ids = [t for t in sorted(TEMPLATES) if {"en", "zh"} <= set(TEMPLATES[t].languages)][:2]
    tasks = [TEMPLATES[t].make_task(lang, 3) for t in ids for lang in ("en", "zh")]
    with SandboxServer() as server:
        crawl(tasks, SandboxCrawl(server_url=server.url), store=RawStore(data / "raw"), collection="web")
    result = dg.materialize(
        ASSETS,
        resources={"storage": StorageResource(root=str(data)), "vlm": VLMResource(kind="none")},
        run_config=RUN,
        instance=dg.DagsterInstance.ephemeral(),
    )
    evals = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert all(e.passed for e in evals.values()), {k: e.metadata["detail"].value for k, e in evals.items()}
    meta = result.asset_materializations_for_node("grounding_set")[0].metadata
    assert meta["samples_per_unique_screen"].value >= 15
    assert set(meta["languages"].value) == {"en", "zh"}
    assert meta["dropped"].value["not_measured"] == 0  # the crawler measured every element
