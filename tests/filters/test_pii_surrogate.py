"""Surrogates: valid formats and check digits, the same value the same surrogate in every
field of a trajectory, re-runs byte-identical; synthetic sources kept and listed."""

from __future__ import annotations

import re

import pytest

from filters.pii import find_pii, luhn_valid, scrub_task, valid_cn_id
from filters.pii_blur import scrub_step
from filters.pii_sources import is_synthetic, synthetic_source_names
from filters.pii_surrogate import Surrogates, id_check_char, is_valid, surrogate
from sandbox.apps import APPS
from sandbox.planted_pii import planted_for
from schemas.actions import Action, ActionType
from schemas.environment import Environment
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory


def test_id_check_character_is_iso_7064_mod_11_2():
    # GB 11643's published example and one ending in X.
    assert id_check_char("11010519491231002") == "X"
    assert id_check_char("44052418800101001") == "4"
    for value in ("11010519491231002X", "440305199206177284"):
        out = surrogate("cn_id", value, "t1")
        assert valid_cn_id(out) and out != value
        assert out[:2] == value[:2]  # the province stays
        assert int(out[16]) % 2 == int(value[16]) % 2  # and the sex digit's parity
        assert out[17] == id_check_char(out[:17])


@pytest.mark.parametrize(
    "value", ["4111 1111 1111 1111", "6212260200012345670", "3782-822463-10005", "4007374848350181"]
)
def test_cards_keep_issuer_grouping_and_pass_luhn(value):
    out = surrogate("bank_card", value, "t1")
    assert luhn_valid(out) and out != value and is_valid("bank_card", out)
    assert re.sub(r"\d", "0", out) == re.sub(r"\d", "0", value)  # same grouping
    assert re.sub(r"\D", "", out)[:6] == re.sub(r"\D", "", value)[:6]


@pytest.mark.parametrize(
    "value,shape",
    [
        ("13912345678", r"139\d{8}"),
        ("+86 139-1234-5678", r"\+86 139-\d{4}-\d{4}"),
        ("(206) 555-0103", r"\(206\) [2-9]\d{2}-\d{4}"),
        ("010-62751234", r"010-[2-9]\d{7}"),
        ("+44 20 7946 0958", r"\+44 \d{2} \d{4} \d{4}"),
    ],
)
def test_phones_keep_their_shape_and_prefix(value, shape):
    out = surrogate("phone", value, "t1")
    assert re.fullmatch(shape, out) and out != value
    assert [m.kind for m in find_pii(f"call {out} now")] == ["phone"]


def test_emails_and_addresses_stay_valid():
    e = surrogate("email", "Li.Na_88@corp-mail.cn", "t1")
    assert re.fullmatch(r"[A-Z][a-z]\.[A-Z][a-z]_\d\d@example\.(com|net|org)", e)
    for value in (
        "1126 Harbor Street, Georgetown, TX 78695",
        "42 W Elm St., Apt 3B, Chicago, IL 60610-1234",
        "广东省深圳市南山区科技南路377号",
        "江苏省南京市鼓楼区中山北路30号3栋2单元501室",
    ):
        out = surrogate("address", value, "t1")
        assert out != value and is_valid("address", out), (value, out)
    assert surrogate("address", "广东省深圳市南山区科技南路377号", "t1").startswith("广东省深圳市南山区")


def test_every_planted_value_gets_a_valid_distinct_surrogate():
    n = 0
    for app in sorted(APPS):
        for lang in ("en", "zh"):
            for seed in range(3):
                for p in planted_for(app, lang, seed):
                    out = surrogate(p["kind"], p["value"], f"traj-{seed}")
                    assert out != p["value"] and is_valid(p["kind"], out), (p, out)
                    n += 1
    assert n > 100


def test_seeded_by_trajectory_and_value():
    assert surrogate("email", "a.b@example.com", "t1") == surrogate("email", "a.b@example.com", "t1")
    assert surrogate("email", "a.b@example.com", "t1") != surrogate("email", "a.b@example.com", "t2")
    # One mobile, three spellings: the same digits, each spelling's separators.
    outs = [surrogate("phone", v, "t1") for v in ("13912345678", "139 1234 5678", "+86 139-1234-5678")]
    assert len({re.sub(r"\D", "", o)[-11:] for o in outs}) == 1


EMAIL, PHONE, CARD = "alice.smith@example.com", "13912345678", "6212260200012345670"


def _trajectory(source="import", source_name="aitz") -> tuple[Trajectory, Step]:
    task = Task(
        task_id="t",
        instruction=f"Update my account email address to {EMAIL}.",
        language="en",
        app="mail",
        params={"to": EMAIL},
    )
    traj = Trajectory(
        trajectory_id="traj-1",
        task=task,
        platform="web",
        app="mail",
        policy="oracle",
        source=source,
        source_name=source_name,
        num_steps=1,
        device=DeviceProfile(viewport_width=100, viewport_height=100),
    )
    step = Step(
        trajectory_id="traj-1",
        index=0,
        screenshot="",
        width=100,
        height=100,
        a11y_tree=f'- textbox "Email" [box=0,0,80,20]\n- text "Phone {PHONE} card {CARD}" [box=0,30,90,20]',
        elements=[Element(role="textbox", name=f"Email {EMAIL}", bbox=(0, 0, 0.8, 0.2))],
        thought=f"I type {EMAIL} and note {PHONE}.",
        action=Action.type_text(EMAIL, 0.4, 0.1),
    )
    return traj, step


def test_one_value_one_surrogate_in_every_field_of_a_trajectory():
    traj, step = _trajectory()
    surr = Surrogates(traj.trajectory_id)
    surr.learn(traj.task.instruction)
    task, _ = scrub_task(traj.task, surr)
    res = scrub_step(step, None, surrogates=surr)
    answer = scrub_step(
        step.model_copy(update={"action": Action(type=ActionType.ANSWER, text=PHONE)}), None, surrogates=surr
    ).step
    s_email = surrogate("email", EMAIL, "traj-1")
    s_phone = surrogate("phone", PHONE, "traj-1")
    assert task.instruction == f"Update my account email address to {s_email}."
    assert task.params == {"to": s_email}
    assert res.step.action.text == s_email
    assert res.step.thought == f"I type {s_email} and note {s_phone}."
    assert res.step.elements[0].name == f"Email {s_email}"
    assert s_phone in res.step.a11y_tree and surrogate("bank_card", CARD, "traj-1") in res.step.a11y_tree
    assert answer.action.text == s_phone
    everything = " ".join([task.instruction, res.step.a11y_tree, res.step.thought, res.step.action.text])
    assert EMAIL not in everything and PHONE not in everything and "[" + "EMAIL]" not in everything
    assert "[box=0,30,90,20]" in res.step.a11y_tree  # boxes untouched


def test_known_values_are_replaced_where_the_detectors_alone_miss_them():
    surr = Surrogates("t")
    surr.learn(f"mail {EMAIL}")
    glued = f"contact_{EMAIL}"  # no boundary before the address: the pattern alone reads less
    out, matches = surr.scrub(glued)
    assert EMAIL not in out and matches


def test_synthetic_sources_keep_their_values_and_list_them():
    traj, step = _trajectory(source="crawl", source_name="sandbox")
    assert is_synthetic(traj) and not is_synthetic(_trajectory()[0])
    assert is_synthetic(traj.model_copy(update={"source_name": "sandbox:reflection"}))
    assert not is_synthetic(traj.model_copy(update={"source": "import"}))  # imports are real
    # A rollout through the Gym API is played live in the app, as a crawl is.
    assert is_synthetic(traj.model_copy(update={"source": "rollout", "source_name": "sandbox:agent:gym"}))
    res = scrub_step(step, None, keep=True)
    assert res.step == step and res.image is None
    assert {r["kind"] for r in res.records} == {"email", "phone", "bank_card"}
    assert all(r["kept"] == "synthetic" for r in res.records)


def test_environment_files_add_or_remove_synthetic_sources():
    def env(name, synthetic):
        return Environment(
            name=name,
            start_url="http://127.0.0.1:1/",
            explore={"policy": "random_walk"},
            synthetic_data=synthetic,
        )

    assert synthetic_source_names([env("demo_shop", True)]) == ("demo_shop", "sandbox")
    assert synthetic_source_names([env("sandbox", False), env("crm", False)]) == ()
