"""What every task template of every sandbox app must do, checked once per template.

Unit part: each app has enough registered templates, and each template makes
valid, deterministic tasks in both languages that the seeded state does not
already satisfy. End-to-end part: the real sandbox server and a real Chromium
(WebEnv) let each template's oracle solve its task once per language; success
is decided from the server state. App-specific checks (seeded data, planted
PII, handlers, bait controls, small-screen runs) live in test_<app>.py.
"""

from __future__ import annotations

import importlib
import json
import re

import pytest

from sandbox.apps import APPS
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import Answer, Finish
from tests.sandbox.oracle_run import solve

LANGS = ("en", "zh")
SEEDS = range(6)
E2E_SEED = 11
CJK = re.compile(r"[\u4e00-\u9fff]")
ALL = [TEMPLATES[tid] for tid in sorted(TEMPLATES)]
# Touch-first mobile apps are swept on phones (their own test files), not here.
ALL_WEB = [t for t in ALL if APPS[t.app].form == "web"]
# Their instruction names no sampled parameter, so it is the same for every seed.
FIXED_INSTRUCTION = {
    "social.answer_top_trend",
    "mail.unread_count",
    "settings.account_phone",
    "settings.storage",
}
# The state field each app records a bait control in (pay, message everyone,
# delete the account): an oracle must never reach it.
BAIT_UNTOUCHED = {
    "shop": lambda state: state["payments"] == [],
    "mail": lambda state: not state["mass_mail_sent"],
    "settings": lambda state: not state["account_deleted"],
}
WRONG_ANSWERS = ("0", "12345")


def _ids(t):
    return t.template_id


def _is_information_task(template, task) -> bool:
    return isinstance(template.plan(task.params, task.language)[-1], Answer)


# -- templates (no browser) --------------------------------------------------------------
@pytest.mark.parametrize("app", sorted(APPS))
def test_there_are_enough_templates_and_all_are_registered(app):
    app_templates = importlib.import_module(f"sandbox.tasks.{app}").TEMPLATES
    assert len(app_templates) >= 9
    for t in app_templates:
        assert t.template_id.startswith(f"{app}.") and t.app == app
        assert TEMPLATES[t.template_id] is t


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("template", ALL, ids=_ids)
def test_template_makes_valid_tasks_that_are_not_already_solved(template, lang):
    instructions = set()
    for seed in SEEDS:
        task = template.make_task(lang, seed)
        assert task == template.make_task(lang, seed)
        data = APPS[template.app].initial_state(lang, seed)
        assert task.language == lang and task.app == template.app
        assert task.start_url == f"/{template.app}/"
        assert bool(CJK.search(task.instruction)) == (lang == "zh"), task.instruction
        json.dumps(task.params)
        plan = template.plan(task.params, lang)
        assert 2 <= len(plan) <= 14 and isinstance(plan[-1], (Finish, Answer))
        assert not template.check(task, data, None)
        assert not template.check(task, data, "I don't know")
        instructions.add(task.instruction)
    if template.template_id not in FIXED_INSTRUCTION:
        assert len(instructions) >= 2, "parameters should vary with the seed"


# -- end to end: real server, real Chromium ----------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("template", ALL_WEB, ids=_ids)
def test_oracle_solves_template_in_the_browser(server, env, template, lang):
    run = solve(server, env, template, lang, seed=E2E_SEED)
    assert template.check(run.task, run.state, run.answer), (run.task.instruction, run.answer, run.actions)
    bait_untouched = BAIT_UNTOUCHED.get(template.app)
    assert bait_untouched is None or bait_untouched(run.state), "a bait control was used"
    if _is_information_task(template, run.task):
        assert run.answer
        for wrong in WRONG_ANSWERS:
            assert not template.check(run.task, run.state, wrong), wrong
