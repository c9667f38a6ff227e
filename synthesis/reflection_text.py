"""The wording of reflection augmentation, English and Chinese written natively.

A reflection says three things about the step that went wrong: what the
screen shows now (read from the live observation: URL path, headings, the
toggled control's state), why that is not the task's path, and how the
episode gets back on it (go back, switch the control back, or carry on from
this screen). It is wrapped in `<reflection>` by the caller.

Pure text from plain data (an Observation): the live episode that needs it
(sandbox/reflection.py's ReflectionPolicy) is given `reflection` as its writer
by the caller (dagster_project/assets/reflection.py), so collection never
imports synthesis.
"""

from __future__ import annotations

from urllib.parse import urlparse

from schemas.action_words import ZH_ROLE  # the oracle's own role words: taps read alike
from schemas.observation import Observation


def _role(role: str, lang: str) -> str:
    return ZH_ROLE.get(role, role) if lang == "zh" else role


def screen_path(url: str) -> str:
    """The URL without scheme and host: what the screen is, not where it is served."""
    u = urlparse(url)
    return u.path + (f"?{u.query}" if u.query else "") if u.scheme else url


def salient(obs: Observation, limit: int = 3) -> list[str]:
    """Names that say what a screen is: its headings, else its first named controls."""
    names = [e.name for e in obs.elements if e.role == "heading" and e.name.strip()]
    if not names:
        names = [e.name for e in obs.elements if e.role in ("link", "button", "tab") and e.name.strip()]
    out: list[str] = []
    for n in names:
        if n not in out:
            out.append(n)
    return out[:limit]


def _quote_list(names: list[str], lang: str) -> str:
    if lang == "zh":
        return "、".join(f"“{n}”" for n in names)
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def reflection(
    kind: str,
    *,
    lang: str,
    wrong_role: str,
    wrong_name: str,
    intended_name: str,
    obs: Observation,
    screen_changed: bool,
    checked: bool | None = None,
    next_description: str | None = None,
) -> str:
    """The text inside `<reflection>`, for a correction of `kind` back|undo|replan."""
    path = screen_path(obs.url)
    shown = salient(obs)
    if lang == "zh":
        return _zh(
            kind,
            _role(wrong_role, lang),
            wrong_name,
            intended_name,
            path,
            shown,
            screen_changed,
            checked,
            next_description,
        )
    return _en(
        kind, wrong_role, wrong_name, intended_name, path, shown, screen_changed, checked, next_description
    )


def _en(kind, role, wrong, intended, path, shown, changed, checked, nxt) -> str:
    head = f"I tapped the {role} '{wrong}', but the step the task needed was '{intended}'."
    if kind == "back":
        where = f"The screen now shows {path}"
        if shown:
            where += f" with {_quote_list(shown, 'en')}"
        return (
            f"{head} {where}: this page is not on the way to the goal. "
            f"I will go back to the previous page and tap '{intended}' instead."
        )
    if kind == "undo":
        if role == "checkbox":
            state = "ticked" if checked else "unticked"
        else:
            state = "switched on" if checked else "switched off"
        return (
            f"{head} The screen is still {path}, but '{wrong}' is now {state}, "
            f"which the task did not ask for. I will tap '{wrong}' again to put it "
            f"back, then tap '{intended}'."
        )
    seen = (
        f"the screen now shows {path}" + (f" with {_quote_list(shown, 'en')}" if shown else "")
        if changed
        else "nothing on the screen changed"
    )
    plan = f" Next: {nxt}." if nxt else ""
    return f"{head} After it, {seen}. I can carry on from this screen without going back.{plan}"


def _zh(kind, role, wrong, intended, path, shown, changed, checked, nxt) -> str:
    head = f"我点了{role}“{wrong}”，但任务这一步需要的是“{intended}”。"
    if kind == "back":
        where = f"现在屏幕显示的是 {path} 页面"
        if shown:
            where += f"，上面有{_quote_list(shown, 'zh')}"
        return f"{head}{where}，这个页面和目标无关。我先返回上一页，再点击“{intended}”。"
    if kind == "undo":
        if role == ZH_ROLE["checkbox"]:
            state = "勾选" if checked else "取消勾选"
        else:
            state = "打开" if checked else "关闭"
        return (
            f"{head}页面仍是 {path}，但“{wrong}”现在被{state}了，这不是任务要求的。"
            f"我再点一次“{wrong}”把它恢复原状，然后点击“{intended}”。"
        )
    seen = (
        f"屏幕现在显示的是 {path}" + (f"，上面有{_quote_list(shown, 'zh')}" if shown else "")
        if changed
        else "屏幕没有任何变化"
    )
    plan = f"接下来：{nxt}。" if nxt else ""
    return f"{head}点完之后{seen}。不用返回，在当前屏幕上继续即可。{plan}"
