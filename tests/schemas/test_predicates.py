"""The `predicates` verifier: its file shape (errors name file, task and field) and its
pure evaluation on end states (trees as Chromium and the shared renderer write them)."""

from __future__ import annotations

import pytest

from crawlers.desktop_tree import normalise_tree
from crawlers.page_source import normalise
from schemas.environment import EnvironmentFileError, environment_from_dict, load_environment
from schemas.predicate_eval import EndState, check, compare, pick, verdict
from schemas.predicates import Predicate

# What Chromium's aria_snapshot(mode="ai", boxes=True) gave for a small form (checked,
# mixed, expanded, selected, a typed value, a select's chosen option, switches).
WEB_TREE = """- generic [ref=e1] [box=8,8,1264,704]:
  - checkbox "A" [checked] [ref=e2] [box=12,11,13,13]
  - checkbox "B" [ref=e3] [box=32,11,13,13]
  - checkbox "M" [checked=mixed] [ref=e4] [box=56,11,13,13]
  - button "Menu open" [expanded] [ref=e5] [box=76,9,83,21]
  - button "Menu shut" [ref=e6] [box=159,9,78,21]
  - tablist [ref=e7] [box=8,30,1264,36]:
    - tab "T1" [selected] [ref=e8] [box=8,30,1264,18]
    - tab "T2" [ref=e9] [box=8,48,1264,18]
  - textbox "Title" [ref=e10] [box=8,87,177,21]: hello   world
  - textbox "Empty" [active] [ref=e11] [box=185,87,177,21]: "typed: here"
  - combobox "Size" [ref=e13] [box=552,88,31,19]:
    - option "S" [box=0,0,0,0]
    - option "L" [selected] [box=0,0,0,0]
  - switch "Wi-Fi" [checked] [ref=e14] [box=587,87,47,21]
  - switch "BT" [ref=e15] [box=634,87,33,21]"""


def P(**kw) -> Predicate:
    return Predicate.model_validate(kw)


def holds(state: EndState, **kw) -> bool:
    return check(P(**kw), state).holds


@pytest.fixture
def web() -> EndState:
    return EndState(url="http://h/world/cities/?_sort=population&q=&q=x", a11y_tree=WEB_TREE)


def test_element_presence_and_states_on_a_chromium_tree(web):
    assert holds(web, element={"role": "checkbox", "name": "A"}, checked=True)
    assert not holds(web, element={"role": "checkbox", "name": "B"}, checked=True)
    assert holds(web, element={"role": "checkbox", "name": "B"}, checked=False)
    assert holds(web, element={"role": "checkbox", "name": "M"}, checked="mixed")
    assert not holds(web, element={"role": "checkbox", "name": "M"}, checked=True)
    assert holds(web, element={"role": "button", "name": "Menu open"}, expanded=True)
    assert holds(web, element={"role": "button", "name": "Menu shut"}, expanded=False)
    assert holds(web, element={"role": "tab", "name": "T1"}, selected=True)
    assert not holds(web, element={"role": "tab", "name": "T2"}, selected=True)
    assert holds(web, element={"role": "switch", "name": "Wi-Fi"}, checked=True)
    # Roles are exact: a switch is no checkbox.
    assert not holds(web, element={"role": "checkbox", "name": "Wi-Fi"})
    assert holds(web, element={"role": "dialog"}, present=False)
    assert not holds(web, element={"role": "switch"}, present=False)
    # Any of several matches may satisfy the states.
    assert holds(web, element={"role": "switch"}, checked=False)
    assert holds(web, element={"role": "tab", "name_contains": "t2"})


def test_shows_answers_as_a_bare_element_predicate_does(web):
    """EndState.shows (the look-up synthesis compares screens with) against check()."""
    refs = [
        {"role": "checkbox", "name": "A"}, {"role": "checkbox", "name": "a"}, {"role": "checkbox", "name": " A "},
        {"role": "button", "name": "Menu  open"}, {"role": "button", "name_contains": "menu"},
        {"role": "button", "name_contains": "open "}, {"role": "tab", "name": "T3"},
        {"role": "option", "name": "L"}, {"role": "link", "name_contains": "x"}, {"role": "switch"},
    ]  # fmt: skip
    for ref in refs:
        named = {k: v for k, v in ref.items() if k != "role"}
        assert web.shows(ref["role"], **named) == holds(web, element=ref), ref
    assert web.shows("button", name_contains="menu") and not web.shows("tab", name="T3")


def test_values_equal_and_contained(web):
    assert holds(web, element={"role": "textbox", "name": "Title"}, value="hello world")
    assert not holds(web, element={"role": "textbox", "name": "Title"}, value="hello")
    assert holds(web, element={"role": "textbox", "name": "Title"}, value_contains="HELLO")
    assert holds(web, element={"role": "textbox", "name": "Empty"}, value="typed: here")
    assert holds(web, element={"role": "combobox", "name": "Size"}, value="L")
    assert not holds(web, element={"role": "combobox", "name": "Size"}, value="S")


def test_url_path_and_query(web):
    assert holds(web, url={"path": "/world/cities"})  # a trailing slash aside
    assert not holds(web, url={"path": "/world"})
    assert holds(web, url={"path_contains": "/cities"})
    assert holds(web, url={"query": {"_sort": "population", "q": "x"}})
    assert holds(web, url={"query": {"q": None}})
    assert not holds(web, url={"query": {"_sort": "name"}})
    assert not holds(web, url={"query": {"page": None}})
    decoded = EndState(url="http://h/world/cities/%E5%8C%97%E4%BA%AC?n=%E5%8C%97")
    assert holds(decoded, url={"path": "/world/cities/北京", "query": {"n": "北"}})


def test_probe_comparisons_and_pick():
    state = EndState(probes={"n": 3, "text": " Buy milk\n", "rows": [{"t": "a"}, {"t": "b"}], "gone": None})
    assert holds(state, probe="n", equals=3) and holds(state, probe="n", equals="3")
    assert holds(state, probe="n", greater_than=2) and not holds(state, probe="n", greater_than=3)
    assert holds(state, probe="n", less_than=3.5) and holds(state, probe="n", not_equals=4)
    assert holds(state, probe="text", equals="Buy milk") and holds(state, probe="text", contains="MILK")
    assert holds(state, probe="rows", greater_than=1)  # a list compares by its length
    assert holds(state, probe="rows", contains={"t": "b"})
    assert holds(state, probe="gone", equals=None) and not holds(state, probe="gone", greater_than=0)
    assert not compare("equals", True, 1) and not compare("equals", "yes", True)
    assert not compare("greater_than", "many", 1)
    body = {"rows": [{"title": "milk"}, {"title": "eggs"}], "length": 7}
    assert pick(body, "rows.1.title") == "eggs" and pick(body, "rows.length") == 2
    assert pick(body, "length") == 7  # a key wins over the length
    assert pick(body, "rows.5.title") is None and pick(body, "nope.x") is None
    assert pick("abc", "length") == 3 and pick(body, None) is body
    assert pick(body, "rows.*.title") == ["milk", "eggs"] and pick(body["rows"], "*") == body["rows"]
    assert holds(EndState(probes={"saved": pick(body, "rows.*.title")}), probe="saved", contains="milk")
    assert not holds(EndState(probes={"saved": ["Draft of 'milk'"]}), probe="saved", contains="milk")


def test_the_verdict_names_the_first_failing_predicate(web):
    preds = [
        P(element={"role": "switch", "name": "Wi-Fi"}, checked=True),
        P(element={"role": "switch", "name": "BT"}, checked=True),
        P(url={"path": "/elsewhere"}),
    ]
    out = verdict(preds, web)
    assert (out["done"], out["success"], out["reward"]) == (False, False, 0.0)
    assert out["reason"] == (
        "predicate 1 (switch 'BT' checked=True) fails: found 1, none matching: checked=False"
        " (and 1 more of 3 fail)"
    )
    assert verdict(preds[:1], web) == {
        "done": True,
        "success": True,
        "reward": 1.0,
        "reason": "all 1 predicates hold",
    }
    missing = verdict([P(element={"role": "dialog", "name": "Saved"})], web)["reason"]
    assert missing == "predicate 0 (dialog 'Saved' present) fails: not found"
    probe = verdict([P(probe="count", greater_than=2)], EndState(probes={"count": 1}))["reason"]
    assert probe == "predicate 0 (probe count greater than 2.0) fails: value 1"


def test_states_from_the_shared_renderer_mobile_html_and_desktop():
    """A phone's HTML page source and a desktop's AT-SPI answer are rendered in the same
    grammar; the predicates read their states and values alike."""
    html = """<html><body data-tf-box="0,0,400,800">
      <input type="checkbox" aria-label="Dark mode" data-tf-box="10,10,20,20" data-tf-checked="true">
      <button aria-expanded="true" data-tf-box="10,40,100,30">Filters</button>
      <input aria-label="City" data-tf-box="10,80,200,30" data-tf-value="Paris">
    </body></html>"""
    tree, _ = normalise("html", html, 400, 800)
    state = EndState(a11y_tree=tree)
    assert holds(state, element={"role": "checkbox", "name": "Dark mode"}, checked=True), tree
    assert holds(state, element={"role": "button", "name": "Filters"}, expanded=True), tree
    assert holds(state, element={"role": "textbox", "name": "City"}, value="Paris"), tree
    node = {"role": "frame", "name": "Prefs", "states": ["showing", "active", "enabled", "sensitive"]}
    node["box"] = [0, 0, 400, 300]
    kids = [
        ("check box", "Wrap", ["checked"], None),
        ("tree item", "Docs", ["expanded"], None),
        ("text", "Name", ["focused"], "note.txt"),
    ]
    node["children"] = [
        {
            "role": r,
            "name": n,
            "states": ["showing", "enabled", "sensitive", *s],
            "box": [10, 10 + 30 * i, 100, 20],
        }
        | ({"value": v} if v else {})
        for i, (r, n, s, v) in enumerate(kids)
    ]
    tree, _, _ = normalise_tree({"apps": [{"name": "app", "children": [node]}]}, 400, 300)
    state = EndState(url="desktop://app/Prefs", a11y_tree=tree)
    assert holds(state, element={"role": "checkbox", "name": "Wrap"}, checked=True), tree
    assert holds(state, element={"role": "treeitem", "name": "Docs"}, expanded=True), tree
    assert holds(state, element={"role": "textbox", "name": "Name"}, value="note.txt"), tree


BASE = {"name": "app", "start_url": "http://127.0.0.1:9/", "probes": {"count": {"js": "1"}}}


def _load(task_verifier: dict, **extra) -> None:
    environment_from_dict(
        {**BASE, **extra, "tasks": [{"task_id": "t-1", "instruction": "x", "verifier": task_verifier}]},
        source="app.yaml",
    )


def test_a_probe_the_file_does_not_declare_names_file_task_and_field():
    with pytest.raises(EnvironmentFileError) as e:
        _load({"kind": "predicates", "predicates": [{"url": {"path": "/"}}, {"probe": "total", "equals": 1}]})
    assert e.value.field == "tasks.0.verifier.predicates.1.probe"
    assert str(e.value) == (
        "file app.yaml, environment 'app', field 'tasks.0.verifier.predicates.1.probe': task 't-1': "
        "probe 'total' is not declared in the file's 'probes' (declared: count)"
    )


@pytest.mark.parametrize(
    "predicate, field, message",
    [
        (
            {"element": {"role": "switch"}, "chekced": True},
            "predicates.0.chekced",
            "unknown field; known: checked,",
        ),
        (
            {"element": {"role": "x"}, "equals": 1},
            "predicates.0",
            "'equals' is for probe predicates, not element",
        ),
        (
            {"url": {"path": "/"}, "checked": True},
            "predicates.0",
            "'checked' is for element predicates, not url",
        ),
        ({"probe": "count"}, "predicates.0", "give exactly one of equals, not_equals"),
        ({"probe": "count", "equals": 1, "less_than": 2}, "predicates.0", "(got equals, less_than)"),
        ({"element": {"role": "x"}, "url": {"path": "/"}}, "predicates.0", "a predicate is one of"),
        ({"element": {"role": "x"}, "present": False, "checked": True}, "predicates.0", "checks a present"),
        (
            {"element": {"role": "x", "nam": "y"}},
            "predicates.0.element.nam",
            "known: name, name_contains, role",
        ),
        ({"url": {}}, "predicates.0.url", "needs 'path', 'path_contains' or 'query'"),
    ],
)
def test_bad_predicates_are_refused_with_task_and_field(predicate, field, message):
    with pytest.raises(EnvironmentFileError) as e:
        _load({"kind": "predicates", "predicates": [predicate]})
    assert e.value.field == f"tasks.0.verifier.{field}"
    assert message in str(e.value) and "task 't-1': " in str(e.value)


def test_verifier_and_probe_shapes_are_checked(tmp_path):
    with pytest.raises(EnvironmentFileError, match="a predicates verifier needs 'predicates'"):
        _load({"kind": "predicates"})
    with pytest.raises(EnvironmentFileError, match="'predicates' is for predicates verifiers, not js"):
        _load({"kind": "js", "expression": "1", "predicates": [{"url": {"path": "/"}}]})
    with pytest.raises(EnvironmentFileError) as e:
        _load({"kind": "predicates", "predicates": [{"url": {"path": "/"}}]}, probes={"n": {"command": "ls"}})
    assert e.value.field == "probes.n.command" and "desktop session" in str(e.value)
    with pytest.raises(EnvironmentFileError, match="one of {js: EXPRESSION}"):
        _load({"kind": "predicates", "predicates": [{"url": {"path": "/"}}]}, probes={"n": {}})
    # A task file's predicates are checked against the environment file's probes.
    (tmp_path / "env.yaml").write_text(
        "name: app\nstart_url: http://127.0.0.1:9/\nprobes: {count: {http: 'http://127.0.0.1:9/n'}}\n"
        "tasks: tasks.jsonl\n"
    )
    (tmp_path / "tasks.jsonl").write_text(
        '{"task_id": "ok", "instruction": "x", "verifier": {"kind": "predicates", '
        '"predicates": [{"probe": "count", "greater_than": 0}]}}\n'
        '{"task_id": "bad", "instruction": "x", "verifier": {"kind": "predicates", '
        '"predicates": [{"probe": "cuont", "greater_than": 0}]}}\n'
    )
    with pytest.raises(EnvironmentFileError, match="task 'bad': probe 'cuont' is not declared") as e:
        load_environment(tmp_path / "env.yaml")
    assert e.value.field == "tasks.1.verifier.predicates.0.probe"


def test_a_dumped_file_reads_back_with_the_same_predicates():
    """Environments travel dumped (the Dagster assets, task files): every predicate
    comes back as written, a comparison with null included."""
    preds = [
        {"element": {"role": "switch", "name": "Wi-Fi"}, "checked": True},
        {"url": {"query": {"q": None}}},
        {"probe": "count", "equals": None},
        {"probe": "count", "greater_than": 2},
    ]
    raw = {
        **BASE,
        "tasks": [
            {"task_id": "t", "instruction": "x", "verifier": {"kind": "predicates", "predicates": preds}}
        ],
    }
    env = environment_from_dict(raw)
    for dump in (env.model_dump(), env.model_dump(exclude_none=True), env.model_dump(mode="json")):
        again = environment_from_dict(dump)
        assert again.tasks[0].verifier.predicates == env.tasks[0].verifier.predicates
    assert env.model_dump(exclude_none=True)["tasks"][0]["verifier"]["predicates"] == [
        {"element": {"role": "switch", "name": "Wi-Fi"}, "checked": True},
        {"url": {"query": {"q": None}}},
        {"probe": "count", "equals": None},
        {"probe": "count", "greater_than": 2.0},
    ]
