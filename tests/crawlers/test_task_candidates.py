"""Candidate goal tasks from recorded walks (crawlers/task_candidates.py): what a step
changed becomes a `predicates` goal of the end state, with the steps it needs as its
demonstration. Pure data: walks written as a recorder writes them."""

from __future__ import annotations

import json

from crawlers.task_candidates import candidate_tasks, final_goals, walk_candidates
from schemas.actions import Action
from schemas.environment import environment_from_dict
from schemas.predicate_eval import EndState, verdict
from schemas.predicates import Predicate
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory

ENV = environment_from_dict(
    {"name": "notes", "platform": "web", "start_url": "http://127.0.0.1:9/", "explore": {"episodes": 1}}
)

HOME = """- main:
  - heading "Notes" [level=1]
  - button "New note"
  - tablist:
    - tab "All" [selected]
    - tab "Starred"
  - heading "Welcome"
  - list:
    - listitem "Read the guide"
    - listitem "Star a note"
  - button "Close welcome"
"""


def screen(*, starred=False, welcome=True, dialog=False, title=""):
    tree = (
        HOME.replace('tab "All" [selected]', 'tab "All"').replace('tab "Starred"', 'tab "Starred" [selected]')
        if starred
        else HOME
    )
    if not welcome:
        tree = (
            "\n".join(
                ln
                for ln in tree.splitlines()
                if "Welcome" not in ln and "listitem" not in ln and "welcome" not in ln
            )
            + "\n"
        )
    if dialog:
        value = f": {title}" if title else ""
        tree += f'  - dialog "New note":\n    - textbox "Title"{value}\n    - button "Save"\n'
    return tree


def step(i, tree, action, target=None, url="http://127.0.0.1:9/"):
    return Step(
        trajectory_id="w1", index=i, screenshot="", width=800, height=600, url=url, a11y_tree=tree,
        elements=[target] if target else [], action=action, target=target, screen_changed=True,
    )  # fmt: skip


def walk(steps, tid="w1"):
    traj = Trajectory(
        trajectory_id=tid, task=Task(task_id="explore", instruction="Explore", app="notes", language="en"),
        platform="web", app="notes", device=DeviceProfile(name="desktop", viewport_width=800, viewport_height=600), policy="random_walk",
        num_steps=len(steps),
    )  # fmt: skip
    return traj, [s.model_copy(update={"trajectory_id": tid}) for s in steps]


def el(role, name):
    return Element(role=role, name=name, bbox=(0.1, 0.1, 0.2, 0.2))


def tap(x=0.15):
    return Action(type="tap", x=x, y=0.15)


def holds(row, tree, url="http://127.0.0.1:9/"):
    predicates = [Predicate.model_validate(p) for p in row["verifier"]["predicates"]]
    return verdict(predicates, EndState(url=url, a11y_tree=tree))["success"]


def test_a_tab_a_step_selected_is_a_one_step_goal_of_the_end_state():
    steps = [
        step(0, screen(), tap(), el("tab", "Starred")),
        step(1, screen(starred=True), Action(type="done")),
    ]
    rows = candidate_tasks([walk(steps)], ENV, ("en", "zh"))
    assert [r["instruction"] for r in rows] == ['Open the "Starred" tab', "打开“Starred”标签页"]
    row = rows[0]
    assert row["verifier"] == {
        "kind": "predicates",
        "predicates": [{"element": {"role": "tab", "name": "Starred"}, "selected": True}],
    }
    assert row["params"]["script"] == [{"tap": {"role": "tab", "name": "Starred"}}]
    assert row["params"]["instruction_source"] == "template" and row["environment"] == "notes"
    # The goal is the end state: false after the reset, true where the walk ended.
    assert not holds(row, screen()) and holds(row, screen(starred=True))


def test_a_field_in_a_dialog_needs_the_tap_that_opened_it():
    steps = [
        step(0, screen(), tap(), el("tab", "Starred")),  # not needed by the note
        step(1, screen(starred=True), tap(), el("button", "New note")),
        step(2, screen(starred=True, dialog=True), Action(type="type", text="milk", x=0.19, y=0.15), el("textbox", "Title")),
        step(3, screen(starred=True, dialog=True, title="milk"), Action(type="done")),
    ]  # fmt: skip
    rows = {r["instruction"]: r for r in candidate_tasks([walk(steps)], ENV, ("en",))}
    typed = rows['Set the "Title" field to "milk"']
    assert typed["params"]["walk_steps"] == [1, 2]
    # Typed near the field's right end (where the caret lands decides what the text joins).
    assert typed["params"]["script"] == [
        {"tap": {"role": "button", "name": "New note"}},
        {"type": "milk", "into": {"role": "textbox", "name": "Title"}, "at": [0.9, 0.5]},
    ]
    opened = rows['Open "New note"']
    assert opened["params"]["walk_steps"] == [1]
    # Where the steps found needed miss (a state no screen showed), validation plays the
    # walk's own path to the goal instead.
    assert typed["params"]["fallback"]["walk_steps"] == [0, 1, 2]
    assert opened["params"]["fallback"]["script"] == [
        {"tap": {"role": "tab", "name": "Starred"}},
        {"tap": {"role": "button", "name": "New note"}},
    ]
    # Two goals of different steps that both hold at the later one: a goal of two parts.
    both = rows['Open the "Starred" tab and set the "Title" field to "milk"']
    assert both["params"]["walk_steps"] == [0, 1, 2] and len(both["verifier"]["predicates"]) == 2
    # ... but not a goal and what it needs (the dialog opened by the typing's demonstration).
    assert 'Open "New note" and set the "Title" field to "milk"' not in rows


def test_side_effects_and_goals_already_true_after_the_reset_are_left_out():
    steps = [
        step(0, screen(), tap(), el("button", "Close welcome")),
        step(1, screen(welcome=False), tap(), el("tab", "Starred")),
        step(2, screen(welcome=False, starred=True), tap(), el("tab", "All")),
        step(3, screen(welcome=False), Action(type="done")),
    ]
    rows = candidate_tasks([walk(steps)], ENV, ("en",))
    said = sorted(r["instruction"] for r in rows)
    # Closing the welcome also removed its list's items: the heading is the goal, once.
    assert 'Close "Welcome"' in said and not any("Read the guide" in s for s in said)
    # "All" selected again is how the reset left it: no goal. A tab losing its
    # selection to another is not a goal either.
    assert not any('"All"' in s for s in said)
    assert 'Open the "Starred" tab' in said


def test_the_shortest_demonstration_of_a_goal_is_kept_across_walks():
    # A key with no element acts on what the step before left: it needs that step too.
    long = [
        step(0, screen(), tap(), el("tab", "Starred")),
        step(1, screen(starred=True), Action(type="key", text="Escape")),
        step(2, screen(starred=True, welcome=False), Action(type="done")),
    ]
    short = [
        step(0, screen(), tap(), el("button", "Close welcome")),
        step(1, screen(welcome=False), Action(type="done")),
    ]
    cands = walk_candidates(*walk(long, "w-long"), ENV) + walk_candidates(*walk(short, "w-short"), ENV)
    closed = {c.walk: c.steps for c in cands if [g.words["en"] for g in c.goals] == ['close "Welcome"']}
    assert closed == {"w-long": [0, 1], "w-short": [0]}
    rows = candidate_tasks([walk(long, "w-long"), walk(short, "w-short")], ENV, ("en",))
    kept = next(r for r in rows if r["instruction"] == 'Close "Welcome"')
    assert kept["params"]["walk"] == "w-short" and len({r["task_id"] for r in rows}) == len(rows)


def test_a_step_on_an_unnamed_element_keeps_the_recorded_actions_only():
    steps = [
        step(0, screen(), Action(type="tap", x=0.3, y=0.3), Element(role="generic", name="")),
        step(1, screen(starred=True), Action(type="done")),
    ]
    row = candidate_tasks([walk(steps)], ENV, ("en",))[0]
    assert "script" not in row["params"] and row["params"]["actions"][0]["type"] == "tap"


def test_recorded_points_replay_the_walk_own_path_less_its_loops():
    """Datasette: a row page opened and left by its breadcrumb, then an unnamed select's
    option picked. The breadcrumb's name is on the reset screen too, but its point is
    only on the row page: a played-as-points demonstration keeps the walk's path and
    cuts only the loop that came back to the same screen."""
    row_page = screen(welcome=False)
    steps = [
        step(0, screen(), tap(), el("link", "Starred"), url="http://127.0.0.1:9/"),
        step(1, screen(starred=True), tap(), el("link", "Row 1"), url="http://127.0.0.1:9/starred"),
        step(2, row_page, tap(0.7), el("link", "Starred"), url="http://127.0.0.1:9/row/1"),
        step(3, screen(starred=True), Action(type="select", text="New note", x=0.2, y=0.2), el("combobox", ""), url="http://127.0.0.1:9/starred"),
        step(4, screen(starred=True, dialog=True), Action(type="done"), url="http://127.0.0.1:9/starred"),
    ]  # fmt: skip
    rows = candidate_tasks([walk(steps)], ENV, ("en",))
    dialog = next(r for r in rows if "dialog" in json.dumps(r["verifier"]))
    assert dialog["params"]["walk_steps"] == [0, 3]
    assert [a["type"] for a in dialog["params"]["actions"]] == ["tap", "select"]
    # ... on the walk's screen, where the points land on what they touched.
    assert dialog["params"]["device"] == "desktop"


def test_an_element_seen_on_a_visit_left_since_needs_no_replay_of_that_visit():
    """Datasette: the cities table opened, left for a row and home, opened again and
    sorted. The second opening is the heading's maker now: the sort, which needs it, is
    not paired with it, and its demonstration is that opening and the sort."""
    index = '- link "cities"\n'
    table = '- heading "cities"\n- link "Paris"\n- link "name"\n'
    steps = [
        step(0, index, tap(), el("link", "cities")),
        step(1, table, tap(), el("link", "Paris"), url="http://127.0.0.1:9/cities"),
        step(2, '- heading "Paris"\n- link "home"\n', tap(), el("link", "home"), url="http://127.0.0.1:9/cities/Paris"),
        step(3, index, tap(), el("link", "cities")),
        step(4, table, tap(), el("link", "name"), url="http://127.0.0.1:9/cities"),
        step(5, table + '- heading "sorted by name"\n', Action(type="done"), url="http://127.0.0.1:9/cities?sort=name"),
    ]  # fmt: skip
    rows = candidate_tasks([walk(steps)], ENV, ("en",))
    sorted_ = [r for r in rows if "sorted by name" in json.dumps(r["verifier"])]
    # The sort needs the table opened again: "open cities and sort" is one goal, said once.
    assert [len(r["verifier"]["predicates"]) for r in sorted_] == [1]
    assert sorted_[0]["params"]["script"] == [
        {"tap": {"role": "link", "name": "cities"}},
        {"tap": {"role": "link", "name": "name"}},
    ]


def test_a_step_back_needs_the_path_that_made_the_history_it_goes_back_in():
    """Datasette: a row opened, then its "Datasette" link (also on the index) and back.
    Back lands on the row only after the path that opened it."""
    index = '- link "cities"\n- link "Datasette"\n'
    row = '- heading "cities: Paris"\n- link "Datasette"\n'
    steps = [
        step(0, index, tap(), el("link", "cities")),
        step(1, '- heading "cities"\n- link "Paris"\n', tap(), el("link", "Paris"), url="http://127.0.0.1:9/cities"),
        step(2, row, tap(), el("link", "Datasette"), url="http://127.0.0.1:9/cities/Paris"),
        step(3, '- heading "Datasette"\n', Action(type="back"), url="http://127.0.0.1:9/about"),
        step(4, row, Action(type="done"), url="http://127.0.0.1:9/cities/Paris"),
    ]  # fmt: skip
    paris = {"element": {"role": "heading", "name": "cities: Paris"}, "present": True}
    made = [c.steps for c in walk_candidates(*walk(steps), ENV) if [g.predicate for g in c.goals] == [paris]]
    assert made == [[0, 1], [0, 1, 2, 3]]  # by the tap on "Paris", and by the step back


def test_a_new_path_or_query_is_a_goal():
    steps = [
        step(0, screen(), tap(), el("link", "Starred")),
        step(1, screen(), Action(type="done"), url="http://127.0.0.1:9/starred?sort=date"),
    ]
    rows = candidate_tasks([walk(steps)], ENV, ("en",))
    goals = sorted(p for r in rows for p in map(str, r["verifier"]["predicates"]))
    assert "{'url': {'path': '/starred'}}" in goals and "{'url': {'query': {'sort': 'date'}}}" in goals


def test_a_value_needs_every_edit_of_its_field_and_a_nameless_tap_its_step_before():
    steps = [
        step(0, screen(), tap(), el("button", "New note")),
        step(1, screen(dialog=True), Action(type="type", text="milk", x=0.5, y=0.5), el("textbox", "Title")),
        step(2, screen(dialog=True, title="milk"), tap(), el("tab", "Starred")),
        step(3, screen(starred=True, dialog=True, title="milk"), tap(0.4), el("button", "")),
        step(4, screen(starred=True, dialog=True, title="milk, eggs"), Action(type="done")),
    ]  # fmt: skip
    rows = {r["instruction"]: r for r in candidate_tasks([walk(steps)], ENV, ("en",))}
    eggs = rows['Set the "Title" field to "milk, eggs"']
    # The nameless button's tap needs the step before it (what it sits on is unknown), and
    # the field's value needs the typing that began it and the tap that opened the dialog.
    assert eggs["params"]["walk_steps"] == [0, 1, 2, 3] and "script" not in eggs["params"]
    assert [a["type"] for a in eggs["params"]["actions"]] == ["tap", "type", "tap", "tap"]


def test_a_vlm_instruction_is_kept_only_when_it_names_what_the_goal_checks():
    """A real HTTP server speaking the OpenAI API answers for the model: an instruction that
    names the checked element is kept (`vlm:<model>`); one that names another is refused and
    the task keeps the template's words in every language."""
    import json

    from crawlers.task_instructions import vlm_instructions
    from tests.vlm.helpers import FakeOpenAIServer
    from trajforge.vlm.openai_backend import OpenAIBackend

    steps = [
        step(0, screen(), tap(), el("tab", "Starred")),
        step(1, screen(starred=True), tap(), el("button", "Close welcome")),
        step(2, screen(starred=True, welcome=False), Action(type="done")),
    ]
    rows = {r["instruction"]: r for r in candidate_tasks([walk(steps)], ENV, ("en",), max_goals=1)}
    tab, welcome = rows['Open the "Starred" tab'], rows['Close "Welcome"']

    def answer(body: dict) -> list[str]:
        asked = json.loads(body["messages"][-1]["content"])["a_plain_wording"]
        said = {
            'Open the "Starred" tab': "Switch to the Starred tab",
            "打开“Starred”标签页": "切换到 Starred 标签页",
            'Close "Welcome"': "Dismiss the banner",  # names nothing the goal checks
            "关闭“Welcome”": "关闭 Welcome 欢迎信息",
        }[asked]
        return [json.dumps({"instruction": said}, ensure_ascii=False)]

    with FakeOpenAIServer(answer) as server:
        backend = OpenAIBackend(server.base_url, "writer-1")
        counts = vlm_instructions([tab, welcome], backend, ("en", "zh"))
    assert counts == {"kept": 3, "names_other_things": 1}
    assert (
        tab["params"]["instruction_source"] == "vlm:writer-1"
        and tab["instruction"] == "Switch to the Starred tab"
    )
    assert tab["params"]["instructions"]["zh"] == "切换到 Starred 标签页"
    assert (
        welcome["params"]["instruction_source"] == "template" and welcome["instruction"] == 'Close "Welcome"'
    )
    assert welcome["params"]["instructions"] == {"en": 'Close "Welcome"', "zh": "关闭“Welcome”"}


def test_final_goals_are_what_still_holds_at_the_end_and_not_after_the_reset():
    steps = [
        step(0, screen(), tap(), el("tab", "Starred")),
        step(1, screen(starred=True), tap(), el("button", "New note")),
        step(2, screen(starred=True, dialog=True), Action(type="type", text="milk", x=0.5, y=0.5), el("textbox", "Title")),
        step(3, screen(starred=True, dialog=True, title="milk"), tap(), el("button", "Close welcome")),
        step(4, screen(starred=True, dialog=True, title="milk", welcome=False), tap(), el("tab", "All")),
        step(5, screen(dialog=True, title="milk", welcome=False), Action(type="done")),
    ]  # fmt: skip
    _, recorded = walk(steps)
    goals = final_goals(recorded, ENV)
    # In the order made; the Starred tab, selected and then left, is not a goal of the end,
    # nor is "All" (selected after the reset too).
    assert [g.predicate for g in goals] == [
        {"element": {"role": "dialog", "name": "New note"}, "present": True},
        {"element": {"role": "textbox", "name": "Title"}, "value": "milk"},
        {"element": {"role": "heading", "name": "Welcome"}, "present": False},
    ]
    end = EndState(url="http://127.0.0.1:9/", a11y_tree=steps[-1].a11y_tree)
    assert verdict([Predicate.model_validate(g.predicate) for g in goals], end)["success"]
    assert final_goals(recorded[:1], ENV) == []  # one screen: nothing made


def test_a_goal_already_so_after_the_reset_does_not_hide_what_the_step_did():
    # Deleting from a message view: back on the list, the message's heading is gone (as it
    # was after the reset: trivial) and the URL says what happened (the step's goal).
    message = screen() + '  - heading "Book club"\n  - button "Delete"\n'
    steps = [
        step(0, screen(), tap(), el("link", "Book club")),
        step(1, message, tap(), el("button", "Delete"), url="http://127.0.0.1:9/m/9"),
        step(2, screen(), Action(type="done"), url="http://127.0.0.1:9/?msg=deleted"),
    ]  # fmt: skip
    _, recorded = walk(steps)
    assert [g.predicate for g in final_goals(recorded, ENV)] == [{"url": {"query": {"msg": "deleted"}}}]
    said = [r["instruction"] for r in candidate_tasks([walk(steps)], ENV, ("en",))]
    assert 'Show the page with msg = "deleted"' in said


def test_back_on_a_page_seen_before_what_changed_since_is_a_goal():
    # A list of long links (sender, subject, preview); the walk opens one, deletes it and
    # lands on the list again: the direct change is a new view, the goal is the row gone.
    rows = [f"Sender {i} Subject {i} " + "a preview long enough to pass sixty characters" for i in range(4)]
    inbox = '- main:\n  - heading "Inbox"\n  - list:\n' + "".join(
        f'    - listitem:\n      - link "{r}"\n' for r in rows
    )
    after = inbox.replace(f'    - listitem:\n      - link "{rows[2]}"\n', "")
    message = '- main:\n  - heading "Subject 2"\n  - button "Delete"\n'
    steps = [
        step(0, inbox, tap(), el("link", rows[2])),
        step(1, message, tap(), el("button", "Delete"), url="http://127.0.0.1:9/m/2"),
        step(2, after, Action(type="done")),
    ]  # fmt: skip
    _, recorded = walk(steps)
    gone = {"element": {"role": "link", "name_contains": rows[2][:60]}, "present": False}
    assert gone in [g.predicate for g in final_goals(recorded, ENV)]
    row = next(
        r for r in candidate_tasks([walk(steps)], ENV, ("en",)) if r["verifier"]["predicates"] == [gone]
    )
    assert row["instruction"] == f'Remove "{rows[2][:60]}…"' and row["params"]["walk_steps"] == [0, 1]
    # Another row deleted instead: not this goal.
    other = inbox.replace(f'    - listitem:\n      - link "{rows[1]}"\n', "")
    assert holds(row, after) and not holds(row, other) and not holds(row, inbox)


def test_a_bare_number_is_no_goal_and_a_second_button_of_a_name_needs_what_made_it():
    more = HOME + '  - button "New note"\n  - cell "21"\n'
    second = Element(role="button", name="New note", bbox=(0.5, 0.5, 0.6, 0.6))
    steps = [
        step(0, HOME, tap(), el("button", "Close welcome")),
        # The second "New note" button (and a count) appears; tapping it opens the dialog.
        step(1, more, tap(0.55), second),
        step(2, more + screen(dialog=True)[len(HOME) :], Action(type="done")),
    ]
    steps[1] = steps[1].model_copy(update={"elements": [el("button", "New note"), second]})
    rows = candidate_tasks([walk(steps)], ENV, ("en",))
    checked = [p for r in rows for p in r["verifier"]["predicates"]]
    assert checked and not any(p.get("element", {}).get("name") == "21" for p in checked), checked
    dialog = next(
        r
        for r in rows
        if {"element": {"role": "dialog", "name": "New note"}, "present": True} in r["verifier"]["predicates"]
    )
    # The tap names the second button (nth 1): the step that made it is in the demonstration.
    assert dialog["params"]["script"][-1] == {"tap": {"role": "button", "name": "New note", "nth": 1}}
    assert len(dialog["params"]["script"]) == 2, dialog["params"]["script"]


# ------------------------------------------------------------------ probe goals
EDITOR = """- frame "note.txt - Mousepad":
  - textbox{value}
"""
DESK = environment_from_dict(
    {
        "name": "editor",
        "platform": "desktop",
        "launch": "mousepad note.txt",
        "probes": {"saved_note": {"command": "cat note.txt"}, "files": {"command": "ls"}},
        "explore": {"episodes": 1, "keys": ["ctrl+s"]},
    }
)


def desk_step(i, value, action, probes, *, target=None, changed=True):
    tree = EDITOR.format(value=f": {value}" if value else "")
    return step(i, tree, action, target, url="desktop://editor").model_copy(
        update={"probes_json": json.dumps(probes), "screen_changed": changed}
    )


def test_a_save_that_changes_no_screen_makes_a_probe_goal_with_every_edit_before_it():
    box = el("textbox", "")
    steps = [
        desk_step(0, "", Action(type="type", x=0.15, y=0.15, text="milk"), {"saved_note": "", "files": "a.txt"}, target=box),
        desk_step(1, "milk", Action(type="type", x=0.15, y=0.15, text=" eggs"), {"saved_note": "", "files": "a.txt"}, target=box),
        desk_step(2, "milk eggs", Action.key("ctrl+s"), {"saved_note": "", "files": "a.txt"}, changed=False),
        desk_step(3, "milk eggs", Action.key("ctrl+shift+n"), {"saved_note": "milk eggs", "files": "a.txt"}),
        desk_step(4, "milk eggs", Action(type="done"), {"saved_note": "milk eggs", "files": "a.txt\nReports"}),
    ]  # fmt: skip
    rows = candidate_tasks([walk(steps)], DESK, ("en", "zh"), max_goals=1)
    by = {json.dumps(r["verifier"]["predicates"]): r for r in rows if r["language"] == "en"}
    saved = by[json.dumps([{"probe": "saved_note", "equals": "milk eggs"}])]
    # The save changed no screen, yet it made the goal; both typings are in its demonstration.
    assert saved["instruction"] == 'Set the saved note to "milk eggs"'
    assert saved["params"]["walk_steps"] == [0, 1, 2]
    # Typed at a point on an unnamed field: played as the recorded points, on the walk's screen.
    assert "script" not in saved["params"] and saved["params"]["device"] == "desktop"
    assert [a["type"] for a in saved["params"]["actions"]] == ["type", "type", "key"]
    # A new line of a listing probe is a `contains` goal; the lines already there are not.
    folder = by[json.dumps([{"probe": "files", "contains": "Reports"}])]
    assert folder["instruction"] == 'Add "Reports" to the files'
    zh = next(r for r in rows if r["language"] == "zh" and r["task_id"].startswith(folder["task_id"][:-3]))
    assert zh["instruction"] == "在files中添加“Reports”"
    assert not any("a.txt" in json.dumps(r["verifier"]) for r in rows)


def test_probe_values_that_name_nothing_make_no_goal():
    box = el("textbox", "")
    steps = [
        desk_step(0, "", Action(type="type", x=0.15, y=0.15, text="1"), {"saved_note": "", "files": ["a"]}, target=box),
        desk_step(1, "1", Action.key("ctrl+s"), {"saved_note": "", "files": ["a"]}, changed=False),
        desk_step(2, "1", Action.key("ctrl+s"), {"saved_note": "12", "files": ["a", "b c"]}, changed=False),
        desk_step(3, "1", Action(type="done"), {"saved_note": "12", "files": ["a", "b c"]}),
    ]  # fmt: skip
    rows = candidate_tasks([walk(steps)], DESK, ("en",), max_goals=1)
    goals = [r["verifier"]["predicates"] for r in rows]
    # A bare number is no goal; a list probe's new item is, unchanged steps make none.
    assert goals == [[{"probe": "files", "contains": "b c"}]]


def test_a_goal_made_twice_in_a_walk_is_never_paired_with_itself():
    new = el("button", "New note")
    close = el("button", "Close")
    steps = [
        step(0, screen(), tap(), new),
        step(1, screen(dialog=True), tap(0.16), close),
        step(2, screen(), tap(), new),
        step(3, screen(dialog=True), Action(type="done")),
    ]
    rows = candidate_tasks([walk(steps)], ENV, ("en",))
    for r in rows:
        predicates = [json.dumps(p, sort_keys=True) for p in r["verifier"]["predicates"]]
        assert len(set(predicates)) == len(predicates), r["instruction"]
    assert 'Open "New note"' in [r["instruction"] for r in rows]


def test_a_change_two_probes_see_is_one_goal_and_volatile_values_are_none():
    env = environment_from_dict(
        {
            "name": "wiki", "platform": "web", "start_url": "http://127.0.0.1:9/", "explore": {"episodes": 1},
            "volatile": [r"\d+(st|nd|rd|th) December \d{4}"],
            "probes": {"saved": {"http": "http://127.0.0.1:9/t.json"}, "titles": {"js": "titles()"}},
        }
    )  # fmt: skip

    def at(i, probes, action):
        return step(i, screen(), action).model_copy(update={"probes_json": json.dumps(probes)})

    steps = [
        at(0, {"saved": [], "titles": []}, tap()),
        at(1, {"saved": ["Milk"], "titles": ["Milk", "5th December 2026"]}, tap()),
        at(2, {"saved": ["Milk"], "titles": ["Milk", "5th December 2026"]}, Action(type="done")),
    ]
    rows = candidate_tasks([walk(steps)], env, ("en",))
    # The page's list and the server's saw the same new title: one goal, the first probe's;
    # the journal named by today's date is no goal.
    assert [r["verifier"]["predicates"] for r in rows] == [[{"probe": "saved", "contains": "Milk"}]]


def test_a_toggle_button_renamed_on_its_page_names_which_item_changed():
    # Pinning a note from the list: the page and its items stay, the URL says only the
    # kind of change (?msg=pin); the note's button "Pin note: A" is now "Unpin note: A".
    notes = '- main:\n  - heading "Notes"\n' + "".join(
        f'  - article "{n}":\n    - link "{n}"\n    - button "Pin note: {n}"\n' for n in "ABC"
    )
    pinned = {n: notes.replace(f'"Pin note: {n}"', f'"Unpin note: {n}"') for n in "ABC"}
    steps = [
        step(0, notes, tap(), el("button", "Pin note: A")),
        step(1, pinned["A"], Action(type="done"), url="http://127.0.0.1:9/?msg=pin"),
    ]  # fmt: skip
    _, recorded = walk(steps)
    goals = [g.predicate for g in final_goals(recorded, ENV)]
    assert {"element": {"role": "button", "name": "Unpin note: A"}, "present": True} in goals
    assert {"element": {"role": "button", "name": "Pin note: A"}, "present": False} in goals
    checks = [Predicate.model_validate(p) for p in goals]
    url = "http://127.0.0.1:9/?msg=pin"
    assert verdict(checks, EndState(url=url, a11y_tree=pinned["A"]))["success"]
    # Another note pinned: the same flash, not this goal.
    assert not verdict(checks, EndState(url=url, a11y_tree=pinned["B"]))["success"]


FEED = """- main:
  - heading "Home"
  - textbox "What's happening?"
  - button "Post"
  - article "Post by City Transit":
    - link "Repost post by City Transit: Weekend service: Line 4 trains run"
    - paragraph:
      - text: "Weekend service: Line 4 trains run every 8 minutes"
"""


def _post(text: str, quote: str = "") -> str:
    """The feed with the user's new post on top (its links cut its text at 30)."""
    quoted = f'    - generic: "{quote}"\n' if quote else ""
    mine = (
        '  - article "Post by Alex":\n'
        f'    - link "Open post by Alex: {text[:30]}"\n'
        f'    - paragraph: "{text}"\n' + quoted
    )
    return FEED.replace('  - article "Post by City Transit"', mine + '  - article "Post by City Transit"')


def test_a_posted_text_names_the_new_post_and_its_typing_is_in_the_demonstration():
    text = "Trying the new coffee place on Elm Street today"
    steps = [
        step(0, FEED, tap(), el("textbox", "What's happening?")),
        step(1, FEED, Action(type="type", text=text, x=0.5, y=0.5), el("textbox", "What's happening?")),
        step(2, FEED.replace('"What\'s happening?"', f"\"What's happening?\": {text}"), tap(),
             el("button", "Post")),
        step(3, _post(text), Action(type="done"), url="http://127.0.0.1:9/?msg=posted"),
    ]  # fmt: skip
    _, recorded = walk(steps)
    echo = {"element": {"role": "paragraph", "name_contains": text}, "present": True}
    assert echo in [g.predicate for g in final_goals(recorded, ENV)]
    row = next(
        r for r in candidate_tasks([walk(steps)], ENV, ("en",)) if r["verifier"]["predicates"] == [echo]
    )
    # Posting it needs the typing (and the tap into the box the typing went to).
    assert row["params"]["walk_steps"] == [1, 2], row["params"]["walk_steps"]
    assert row["instruction"] == f'Show "{text}"'
    assert holds(row, _post(text)) and not holds(row, _post("Another post about the weather")), row
    assert not holds(row, FEED)


def test_the_item_acted_on_names_the_change_it_shows_quoted():
    # A repost: the feed gains the user's post quoting the one reposted. The reposted
    # post's words were on the feed before (as a `text`), the quote is new (`generic`).
    quote = "Weekend service: Line 4 trains run every 8 minutes"
    target = el("link", "Repost post by City Transit: Weekend service: Line 4 trains run")
    page = '- main:\n  - heading "Repost"\n  - textbox "Add a comment"\n  - button "Repost"\n'
    steps = [
        step(0, FEED, tap(), target),
        step(1, page, tap(), el("button", "Repost"), url="http://127.0.0.1:9/repost/t22"),
        step(2, _post("So true!", quote), Action(type="done"), url="http://127.0.0.1:9/?msg=reposted"),
    ]  # fmt: skip
    _, recorded = walk(steps)
    goals = [g.predicate for g in final_goals(recorded, ENV)]
    echo = {
        "element": {"role": "generic", "name_contains": "Weekend service: Line 4 trains run"},
        "present": True,
    }
    assert echo in goals, goals
    other = _post("So true!", "Intervals at 6am in the rain. Who else is training?")
    assert verdict([Predicate.model_validate(echo)], EndState(url="", a11y_tree=_post("So true!", quote)))[
        "success"
    ]
    assert not verdict([Predicate.model_validate(echo)], EndState(url="", a11y_tree=other))["success"]
    # Where the quote's role showed the words before too, the new node's own name is checked.
    same_role = FEED.replace('      - text: "Weekend', '      - generic: "Weekend')
    quoted = _post("So true!", "@metro — " + quote).replace(FEED, same_role)
    steps[0] = step(0, same_role, tap(), target)
    steps[2] = step(2, quoted, Action(type="done"), url="http://127.0.0.1:9/?msg=reposted")
    _, recorded = walk(steps)
    goals = [g.predicate for g in final_goals(recorded, ENV)]
    own = {"element": {"role": "generic", "name": "@metro — " + quote}, "present": True}
    assert own in goals, goals
    # A short label tapped ("Repost", under ITEM_NAME) echoes nothing: the heading stays a
    # goal of its own kind, not a second copy.
    assert not any((g.get("element") or {}).get("name_contains") == "Repost" for g in goals)
