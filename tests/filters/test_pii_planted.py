"""Recall on every sandbox app's planted personal data; false positives on its other text."""

from __future__ import annotations

import collections

import pytest

from filters.pii import KINDS, find_pii
from filters.pii_audit import find_leaks
from sandbox.apps import APPS, MOBILE_APPS, WEB_APPS
from sandbox.apps._personal_data import resolve_path
from sandbox.planted_pii import planted_for

SEEDS = range(30)
# State fields that hold personal data by construction (copies of planted values,
# sender addresses...): not counted as false positives when flagged.
PERSONAL_FIELDS = {"email", "phone", "phone2", "address", "cn_address", "card", "id", "id_number"}


def _strings(node, path=""):
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for k, v in node.items():
            if k != "_planted_pii":
                yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, f"{path}.{i}" if path else str(i))


@pytest.fixture(scope="module")
def sweep():
    """Every app x language x seed: recall counts, stray matches and false positives."""
    found, total = collections.Counter(), collections.Counter()
    misses, stray, fps = [], [], []
    n_other = 0
    for app in sorted(APPS):
        for lang in ("en", "zh"):
            for seed in SEEDS:
                state = APPS[app].initial_state(lang, seed)
                planted = state["_planted_pii"]
                values = [p["value"] for p in planted]
                for p in planted:
                    text = resolve_path(state, p["where"])
                    at = text.find(p["value"])
                    assert at >= 0, p
                    ok = any(
                        m.kind == p["kind"] and m.start <= at and m.end >= at + len(p["value"])
                        for m in find_pii(text)
                    )
                    total[(app, lang, p["kind"])] += 1
                    found[(app, lang, p["kind"])] += ok
                    if not ok:
                        misses.append((app, lang, seed, p))
                planted_paths = {p["where"] for p in planted}
                for path, text in _strings(state):
                    if path in planted_paths:
                        # Prices, amounts and dates around a planted value stay unflagged.
                        stray += [
                            (app, m.text)
                            for m in find_pii(text)
                            if not any(m.text in v or v in m.text for v in values)
                        ]
                        continue
                    if path.rsplit(".", 1)[-1] in PERSONAL_FIELDS or any(v in text for v in values):
                        continue
                    n_other += 1
                    if find_pii(text):
                        fps.append((app, lang, path, text))
    return found, total, misses, stray, fps, n_other


def test_recall_on_planted_values_of_every_app(sweep):
    found, total, misses, *_ = sweep
    assert set(WEB_APPS) | set(MOBILE_APPS) == {a for a, _, _ in total}
    per_kind = collections.Counter()
    per_kind_total = collections.Counter()
    for (app, lang, kind), n in total.items():
        per_kind[(kind, lang)] += found[(app, lang, kind)]
        per_kind_total[(kind, lang)] += n
    for key in sorted(per_kind_total):
        print(f"recall {key[0]:9s} {key[1]}: {per_kind[key]}/{per_kind_total[key]}")
    assert {k for k, _ in per_kind_total} == set(KINDS)
    for (app, lang, kind), n in total.items():
        assert found[(app, lang, kind)] / n >= 0.99, (app, lang, kind, misses[:5])
    assert sum(total.values()) >= 3000


def test_false_positives_on_sandbox_text_are_rare(sweep):
    *_, stray, fps, n_other = sweep
    rate = len(fps) / n_other
    print(
        f"false positives: {len(fps)} of {n_other} non-personal strings ({rate:.4%}); "
        f"stray matches inside planted texts: {len(stray)}"
    )
    assert n_other > 50_000
    assert rate <= 0.01, fps[:10]
    assert len(stray) <= 5, stray[:10]


@pytest.mark.parametrize("app", sorted(APPS))
def test_find_leaks_sees_planted_values_and_not_their_scrubbed_form(app):
    from filters.pii import scrub_text

    planted = planted_for(app, "zh", 7)
    state = APPS[app].initial_state("zh", 7)
    texts = [resolve_path(state, p["where"]) for p in planted]
    leaks = find_leaks(texts, planted)
    assert {(l["value"], l["where"]) for l in leaks} >= {(p["value"], p["where"]) for p in planted}
    assert find_leaks([scrub_text(t)[0] for t in texts], planted) == []


def test_find_leaks_matches_digits_without_separators():
    planted = [
        {"kind": "phone", "value": "(415) 555-0136", "where": "x"},
        {"kind": "bank_card", "value": "4111111111111111", "where": "y"},
    ]
    leaks = find_leaks(["call 415.555.0136", "card 4111 1111 1111 1111", "zip 41555"], planted)
    assert [(l["text_index"], l["form"]) for l in leaks] == [(0, "digits"), (1, "digits")]
    assert find_leaks(["%28415%29%20555-0136"], planted)[0]["form"] == "exact"


def test_planted_for_follows_the_session_seed():
    assert planted_for("settings", "en", 3) == APPS["settings"].initial_state("en", 3)["_planted_pii"]
    assert planted_for("settings", "en", 3) != planted_for("settings", "en", 4)
    # A lab's own app (crawled through its environment file) planted nothing the
    # sandbox knows of: the audit of a store holding its crawls goes on.
    assert planted_for("tiddlywiki", "en", 3) == []
