"""The grounding set: targets by measured visibility, EN/ZH expressions, functional
descriptions, dedup and balance, the frame, the checks (each shown failing), stats and
validate, and imports (real dataset samples: boxes given, never guessed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.actions import Action, ActionType
from schemas.model_profiles import model_profile
from schemas.records import Element, Step
from synthesis.grounding_checks import (
    boxes_on_targets,
    dedup_rate,
    iter_records,
    language_mix,
    points_in_boxes,
    record_problems,
)
from synthesis.grounding_function import TemplateFunction, clean_phrase, screen_change
from synthesis.grounding_samples import GroundingStats, screen_records, vlm_describer
from synthesis.grounding_text import expressions
from synthesis.grounding_writer import write_grounding_set
from synthesis.language import is_chinese
from synthesis.set_options import SetOptions
from tests.synthesis.grounding_fixtures import build_grounding_store, dialog, el, inbox
from trajforge.importers import import_path
from trajforge.read.stats import format_table, shard_stats
from trajforge.read.validate import validate
from trajforge.store.raw import RawStore

SAMPLES = Path(__file__).parents[1] / "importers" / "samples"
SPLITS = (("train", 0.5), ("test", 0.5))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("grounding")
    b = build_grounding_store(root / "curated")
    result = write_grounding_set(b.store, root / "set", options=SetOptions(splits=SPLITS))
    return b, root / "set", result


def test_set_figures_drops_dedup_and_languages(built):
    b, out, r = built
    s = r["summary"]
    # 4 trajectories x 3 screens x 12 elements; per screen 1 unnamed generic (no_name +
    # structural for the dialog), 1 covered link, 1 off-screen button, 1 never measured.
    assert s["candidates"] == 120
    assert {k: v for k, v in s["dropped"].items() if v} == {
        "no_name": 8,
        "structural": 4,
        "not_measured": 8,
        "off_screen": 8,
        "modal_covered": 8,
    }
    # The second trajectory of each language repeats the first's screens, and step 2
    # repeats step 0 (same tree): only the inbox and the dialog of each language are new.
    assert (s["screens"], s["unique_screens"]) == (4, 4)
    assert s["deduplicated"] == s["targets_met"] - 26 and s["dedup_rate"] == pytest.approx(58 / 84)
    assert s["languages"] == {"en": 40, "zh": 40} and s["samples_per_unique_screen"] == 20.0
    assert s["kinds"]["function"] == 2 and s["function_backends"] == {"template": 2}
    records = list(iter_records(out))
    for _, rec, _ in records:
        for smp in rec["samples"]:
            assert smp["language"] == rec["language"]
            assert smp["element"]["name"] not in ("Help", "More", "Old", "帮助", "更多")
            if smp["kind"] in ("role_text", "position", "relation", "function"):
                assert is_chinese(smp["expression"]) == (rec["language"] == "zh"), smp["expression"]
    fn = [smp for _, rec, _ in records for smp in rec["samples"] if smp["kind"] == "function"]
    assert sorted(smp["expression"] for smp in fn) == [
        "the button that opens the New message dialog",
        "打开“写邮件”对话框的按钮",
    ]


def test_points_and_boxes_in_the_profile_frame(tmp_path, built):
    b, _, _ = built
    out = write_grounding_set(b.store, tmp_path / "q3", options=SetOptions("qwen3-vl", splits=SPLITS))
    [(_, rec, _)] = [r for r in iter_records(tmp_path / "q3") if r[1]["language"] == "en"][:1]
    smp = next(s for s in rec["samples"] if s["element"]["name"] == "Compose")
    # box (0.02, 0.25, 0.22, 0.35) on qwen3-vl's 0-1000 grid, rounded outwards; centre (0.12, 0.30)
    assert smp["box"] == [20, 250, 220, 350] and smp["point"] == [120, 300]
    assert json.loads(smp["conversations"][2]["value"]) == {"bbox_2d": smp["box"], "point_2d": smp["point"]}
    assert out["model_profile"] == "qwen3-vl"
    q25 = next(iter_records(built[1]))[1]
    assert (q25["image"]["width"], q25["image"]["height"]) == model_profile("qwen2.5-vl").frame(320, 200)


def test_expressions_say_one_element_and_chinese_has_its_own_order():
    els = [e for e in inbox("zh") if e.visibility is not None and e.visibility.is_target]
    invoice = next(e for e in els if e.name == "账单")
    ex = expressions(invoice, els, "zh")
    assert ex["position"] == "列表中的第二项" and ex["role_text"] == "“账单”列表项"
    assert ex["relation"] == "“周报”列表项下方的列表项"
    go = next(e for e in els if e.name == "搜")
    assert expressions(go, els, "zh")["relation"] == "“搜索”搜索框右边的按钮"
    en = [e for e in inbox("en") if e.visibility is not None and e.visibility.is_target]
    menu = next(e for e in en if e.name == "Menu")
    assert expressions(menu, en, "en") == {
        "text": '"Menu"',
        "role_text": "the Menu image",
        "relation": "the image above the Compose button",
    }
    # Two "OK" targets: neither text nor role+text names one; the column rank still does.
    oks = [el("button", "OK", (0.1, 0.1, 0.3, 0.2)), el("button", "OK", (0.1, 0.5, 0.3, 0.6))]
    assert expressions(oks[1], oks, "en") == {"position": "the second button from the top"}


def test_function_template_and_vlm_labels():
    before = Step(
        trajectory_id="t",
        index=0,
        screenshot="",
        width=10,
        height=10,
        url="http://a/inbox",
        elements=inbox("en"),
        action=Action(type=ActionType.TAP, x=0.1, y=0.3),
    )
    after = before.model_copy(update={"index": 1, "elements": dialog("en")})
    change = screen_change(before, after)
    assert ("dialog", "New message") in change.appeared
    t = TemplateFunction()
    assert t.describe(before.elements[3], change, "en") == "opens the New message dialog"
    assert t.describe(before.elements[3], screen_change(after, before), "zh") == "关闭“New message”对话框"
    page = after.model_copy(
        update={"url": "http://a/settings", "elements": [Element(role="heading", name="Account settings")]}
    )
    assert (
        t.describe(before.elements[7], screen_change(before, page), "en")
        == "goes to the Account settings page"
    )
    assert t.describe(before.elements[7], screen_change(before, before), "en") is None

    class Scripted:  # a VLMBackend answering from a list, keeping the requests
        model_id = "scripted-vlm"

        def __init__(self, answers):
            self.answers, self.requests = list(answers), []

        def generate(self, requests, max_new_tokens, **kw):
            self.requests += requests
            return [self.answers.pop(0) for _ in requests]

    class Blobs:
        def get(self, sha, ext):
            return b""

    from schemas.records import DeviceProfile, Task, Trajectory

    tr = Trajectory(
        trajectory_id="t",
        task=Task(task_id="x", instruction="i", language="en", app="m"),
        platform="web",
        app="m",
        device=DeviceProfile(viewport_width=10, viewport_height=10),
        policy="oracle",
        num_steps=2,
    )
    before = before.model_copy(update={"target": before.elements[3]})
    vlm = Scripted(["Opens the composer.\n", "x " * 40])
    describe = vlm_describer(vlm, Blobs())
    assert describe(tr, [(before, after)]) == {0: ("opens the composer", "scripted-vlm")}
    assert describe(tr, [(before, after)]) == {0: ("opens the New message dialog", "template")}
    assert "New message" in vlm.requests[0].messages[1]["content"][0]["text"]
    assert clean_phrase("“打开设置”。") == "打开设置" and clean_phrase("") is None


def test_the_cap_is_per_role_and_size_so_small_targets_stay_balanced():
    from schemas.records import DeviceProfile, Task, Trajectory

    tr = Trajectory(
        trajectory_id="cap",
        task=Task(task_id="c", instruction="i", language="en", app="m"),
        platform="web",
        app="m",
        device=DeviceProfile(viewport_width=1280, viewport_height=800),
        policy="oracle",
        num_steps=1,
    )
    big = [el("button", f"Action {k}", (0.05 + 0.15 * k, 0.3, 0.18 + 0.15 * k, 0.45)) for k in range(6)]
    tiny = [el("button", f"Icon {k}", (0.05 + 0.03 * k, 0.9, 0.065 + 0.03 * k, 0.92)) for k in range(7)]
    step = Step(
        trajectory_id="cap",
        index=0,
        screenshot="a" * 64,
        width=1280,
        height=800,
        a11y_tree="- button",
        elements=big + tiny,
        action=Action(type=ActionType.WAIT, duration_ms=1),
    )
    stats = GroundingStats()
    [(_, _, rec)] = screen_records(tr, [step], model_profile("qwen2.5-vl"), set(), stats)
    names = {s["element"]["name"] for s in rec["samples"]}
    assert names == {f"Action {k}" for k in range(4)} | {f"Icon {k}" for k in range(4)}
    b = stats.result()["balance"]
    assert b["capped"] == 5 and b["roles_before"] == {"button": 13} and b["roles_after"] == {"button": 8}
    assert b["sizes_before"] == {"medium": 6, "small": 7} and b["sizes_after"] == {"medium": 4, "small": 4}


def test_each_check_fails_on_what_it_guards(built):
    b, out, r = built
    prof = model_profile("qwen2.5-vl")
    records = list(iter_records(out, images=True))
    assert points_in_boxes(records, prof)["passed"] and boxes_on_targets(records, b.store)["passed"]
    assert language_mix(r["summary"])["passed"] and dedup_rate(r["summary"], records)["passed"]

    key, rec, image = records[0]
    moved = json.loads(json.dumps(rec))
    moved["samples"][0]["point"] = [moved["samples"][0]["box"][2] + 5, moved["samples"][0]["box"][1]]
    assert points_in_boxes([(key, moved, image)], prof)["outside"] == 1
    assert record_problems(moved)[0][1] == "samples[0].point"

    covered = json.loads(json.dumps(rec))
    s0 = covered["samples"][0]
    help_el = next(e for e in inbox(rec["language"]) if e.name in ("Help", "帮助"))
    s0["element"], s0["box_norm"] = {"role": "link", "name": help_el.name}, list(help_el.bbox)
    check = boxes_on_targets([(key, covered, None)], b.store)
    assert not check["passed"] and check["reasons"] == {"not_visible": 1}

    en_only = {"language_share": {"en": 1.0}}
    assert not language_mix(en_only)["passed"]
    assert not language_mix({"language_share": {"en": 0.95, "zh": 0.05}})["passed"]
    assert not dedup_rate(r["summary"], records + records[:1])["passed"]  # an element twice
    assert not dedup_rate({**r["summary"], "dedup_rate": 0.97}, records)["passed"]


def test_stats_and_validate_understand_the_set(built, tmp_path):
    _, out, r = built
    st = shard_stats(out)
    assert st["kind"] == "grounding" and st["samples"] == r["summary"]["samples"] == 80
    assert st["languages"] == {"en": 40, "zh": 40} and st["unique_screens"] == 4
    assert "20.0 per unique screen" in format_table(st)
    report = validate(out)
    assert report.ok, [str(p) for p in report.problems]
    assert report.samples == 4  # shard records: one per screen


@pytest.mark.parametrize(
    "fmt, folder, samples",
    [
        ("aitz", "aitz", 23),  # ui_positions with text/icon names (capped per role and size)
        ("mind2web", "mind2web_and_multimodal_mind2web", 2),  # the target's box and name
        ("agentnet", "opencua_agentnet/agentnetbench_sample_data", 0),  # a box without a name
    ],
)
def test_imports_with_boxes_yield_samples_and_never_guess(tmp_path, fmt, folder, samples):
    store = RawStore(tmp_path / "raw")
    import_path(fmt, SAMPLES / folder, store)
    r = write_grounding_set(store, tmp_path / "g", options=SetOptions(splits=SPLITS))
    assert r["summary"]["samples"] == samples
    records = list(iter_records(tmp_path / "g"))
    assert all(s["box_source"] == "dataset" for _, rec, _ in records for s in rec["samples"])
    steps = {(s.trajectory_id, s.index): s for s in store.iter_steps()}
    for _, rec, _ in records:  # every box is one the dataset gave for that very step
        step = steps[(rec["trajectory_id"], rec["index"])]
        given = {tuple(e.bbox) for e in step.elements + ([step.target] if step.target else [])}
        assert all(tuple(s["box_norm"]) in given for s in rec["samples"])
    if samples:
        assert boxes_on_targets(records, store)["passed"]


def test_viewer_draws_a_screen_with_its_targets(built, tmp_path):
    from trajforge.read.viewer import build_site

    _, out, _ = built
    index = build_site(out, tmp_path / "site")
    pages = sorted((index.parent / "t").glob("*.html"))
    html = "".join(p.read_text() for p in pages)
    assert html.count('class="marker point a-ground"') == 26  # one point per target element
    assert html.count('<rect class="target"') == 26
    assert "the button that opens the New message dialog" in html and "列表中的第二项" in html
