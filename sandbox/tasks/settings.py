"""Task templates for the settings app (Android-style in English, 微信-style 设置 in Chinese).

English keeps Display and Language on separate pages; Chinese gathers dark
mode, font size and language under 通用, so the same goal takes a different
path per language.
"""

from __future__ import annotations

import re

from schemas.observation import Observation

from ..apps.settings import FONT_SIZES, LANGUAGES
from .base import Answer, Choose, Fill, Finish, Tap, Target, TaskTemplate, When

APP = "settings"

SWITCH_LABELS = {
    "en": {
        "wifi": "Wi-Fi",
        "bluetooth": "Bluetooth",
        "dark_mode": "Dark mode",
        "notifications.preview": "Show message previews",
        "notifications.sound": "Sound",
        "notifications.vibrate": "Vibrate",
        "notifications.calls": "Call alerts",
        "privacy.location": "Location access",
        "privacy.find_by_phone": "Let others find me by phone number",
        "privacy.friend_verify": "Ask before people add me",
        "privacy.recommend_contacts": "Suggest people from my contacts",
        "privacy.personalised_ads": "Personalised ads",
    },
    "zh": {
        "wifi": "WLAN",
        "bluetooth": "蓝牙",
        "dark_mode": "深色模式",
        "notifications.preview": "通知显示消息详情",
        "notifications.sound": "声音",
        "notifications.vibrate": "振动",
        "notifications.calls": "语音和视频通话邀请通知",
        "privacy.location": "位置信息",
        "privacy.find_by_phone": "通过手机号搜索到我",
        "privacy.friend_verify": "加我为朋友时需要验证",
        "privacy.recommend_contacts": "向我推荐通讯录朋友",
        "privacy.personalised_ads": "个性化广告推荐",
    },
}
# Where each setting lives: the link to tap from the home page, per language.
PAGE_LINK = {
    "en": {
        "notifications": "Notifications",
        "privacy": "Privacy",
        "display": "Display",
        "language": "Language",
        "account": "Account",
        "about": "About phone",
    },
    "zh": {
        "notifications": "新消息通知",
        "privacy": "隐私",
        "display": "通用",
        "language": "通用",
        "account": "账号与安全",
        "about": "关于本机",
    },
}


def _get(state: dict, key: str):
    node = state
    for part in key.split("."):
        node = node[part]
    return node


def _switch(key: str, lang: str) -> Target:
    return Target(SWITCH_LABELS[lang][key], "switch", exact=True)


def _page(page: str, lang: str) -> Tap:
    """Open a settings page from the home list (its link's name starts with the label)."""
    label = PAGE_LINK[lang][page]
    return Tap(
        Target(label, "link", pick=lambda els: next((e for e in els if e.name.startswith(label)), els[0]))
    )


def _on_off(on: bool, lang: str) -> str:
    return ("打开" if on else "关闭") if lang == "zh" else ("on" if on else "off")


def _digits(text: str | None) -> str:
    return re.sub(r"\D", "", text or "")


class SettingsTemplate(TaskTemplate):
    app = APP


class _Toggle(SettingsTemplate):
    """Flip one switch to the value it does not have yet."""

    keys: tuple[str, ...] = ()
    page: str | None = None  # None: the switch is on the home page

    def sample_params(self, data, rng, lang):
        key = rng.choice(self.keys)
        return {"key": key, "target": not _get(data, key)}

    def instruction(self, p, lang):
        label = SWITCH_LABELS[lang][p["key"]]
        if lang == "zh":
            return f"把“{label}”{_on_off(p['target'], lang)}。"
        return f'Turn {_on_off(p["target"], lang)} "{label}".'

    def plan(self, p, lang):
        steps = [] if self.page is None else [_page(self.page, lang)]
        return steps + [Tap(_switch(p["key"], lang)), Finish()]

    def success(self, p, state, answer, lang):
        return _get(state, p["key"]) == p["target"] and not state["account_deleted"]


class WiFi(_Toggle):
    template_id = "settings.wifi"
    keys = ("wifi",)

    def instruction(self, p, lang):
        if lang == "zh":
            return f"{_on_off(p['target'], lang)}WLAN。"
        return f"Turn Wi-Fi {_on_off(p['target'], lang)}."


class Bluetooth(_Toggle):
    template_id = "settings.bluetooth"
    keys = ("bluetooth",)

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把蓝牙{_on_off(p['target'], lang)}。"
        return f"Turn Bluetooth {_on_off(p['target'], lang)}."


class DarkMode(_Toggle):
    template_id = "settings.dark_mode"
    keys = ("dark_mode",)
    page = "display"

    def instruction(self, p, lang):
        if lang == "zh":
            return f"{'开启' if p['target'] else '关闭'}深色模式。"
        return f"{'Enable' if p['target'] else 'Disable'} dark mode."


class Notification(_Toggle):
    template_id = "settings.notification"
    keys = ("notifications.preview", "notifications.sound", "notifications.vibrate", "notifications.calls")
    page = "notifications"

    def instruction(self, p, lang):
        label = SWITCH_LABELS[lang][p["key"]]
        if lang == "zh":
            return f"在新消息通知里把“{label}”{_on_off(p['target'], lang)}。"
        return f'In notification settings, turn {_on_off(p["target"], lang)} "{label}".'


class Privacy(_Toggle):
    template_id = "settings.privacy"
    keys = (
        "privacy.location",
        "privacy.find_by_phone",
        "privacy.friend_verify",
        "privacy.recommend_contacts",
        "privacy.personalised_ads",
    )
    page = "privacy"

    def instruction(self, p, lang):
        label = SWITCH_LABELS[lang][p["key"]]
        if lang == "zh":
            return f"在隐私设置中{_on_off(p['target'], lang)}“{label}”。"
        return f'In privacy settings, turn {_on_off(p["target"], lang)} "{label}".'


class SearchToggle(_Toggle):
    """Reach a switch through the settings search instead of the menus."""

    template_id = "settings.search_toggle"
    keys = ("notifications.vibrate", "notifications.sound", "privacy.location")
    WORDS = {
        "en": {
            "notifications.vibrate": "vibrate",
            "notifications.sound": "sound",
            "privacy.location": "location",
        },
        "zh": {"notifications.vibrate": "振动", "notifications.sound": "声音", "privacy.location": "位置"},
    }

    def instruction(self, p, lang):
        word = self.WORDS[lang][p["key"]]
        label = SWITCH_LABELS[lang][p["key"]]
        if lang == "zh":
            return f"在设置里搜索“{word}”，然后把“{label}”{_on_off(p['target'], lang)}。"
        return f'Search the settings for "{word}" and turn "{label}" {_on_off(p["target"], lang)}.'

    def plan(self, p, lang):
        box = Target("搜索设置项" if lang == "zh" else "Search settings", "searchbox")
        return [Fill(box, self.WORDS[lang][p["key"]], submit=True), Tap(_switch(p["key"], lang)), Finish()]


class FontSize(SettingsTemplate):
    template_id = "settings.font_size"

    def sample_params(self, data, rng, lang):
        code, label = rng.choice([o for o in FONT_SIZES[lang] if o[0] != data["font_size"]])
        return {"size": code, "label": label}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把字体大小调成“{p['label']}”。"
        return f"Set the font size to {p['label']}."

    def plan(self, p, lang):
        box = Target("字体大小" if lang == "zh" else "Font size", "combobox")
        return [_page("display", lang), Choose(box, p["label"]), Finish()]

    def success(self, p, state, answer, lang):
        return state["font_size"] == p["size"]


class Language(SettingsTemplate):
    """The instruction names the language in the user's words; the menu shows endonyms."""

    template_id = "settings.language"
    SPOKEN = {
        "en": {
            "en-US": "US English",
            "en-GB": "British English",
            "zh-CN": "Simplified Chinese",
            "zh-TW": "Traditional Chinese",
            "es": "Spanish",
            "fr": "French",
            "ja": "Japanese",
        },
        "zh": {
            "zh-CN": "简体中文",
            "zh-TW": "繁体中文",
            "en-US": "英语",
            "en-GB": "英式英语",
            "es": "西班牙语",
            "fr": "法语",
            "ja": "日语",
        },
    }

    def sample_params(self, data, rng, lang):
        options = [o for o in LANGUAGES[lang] if o[0] not in (data["language"], "system")]
        code, label = rng.choice(options)
        return {"language": code, "label": label}

    def instruction(self, p, lang):
        name = self.SPOKEN[lang][p["language"]]
        if lang == "zh":
            return f"在通用设置里把多语言改成{name}。"
        return f"Change the language to {name}."

    def plan(self, p, lang):
        box = Target("多语言" if lang == "zh" else "Language", "combobox")
        return [_page("language", lang), Choose(box, p["label"]), Finish()]

    def success(self, p, state, answer, lang):
        return state["language"] == p["language"]


FIELD_LABEL = {
    "en": {"name": "Name", "email": "Email", "phone": "Phone number"},
    "zh": {"name": "昵称", "email": "邮箱", "phone": "手机号"},
}


def _has_text(label: str):
    """True when the text box named `label` shows a value (the tree prints it after ':')."""
    pattern = re.compile(rf'textbox "{re.escape(label)}"[^\n]*\]: \S')
    return lambda obs: bool(pattern.search(obs.a11y_tree))


def _edit_field(field: str, value: str, lang: str) -> list:
    """From the account page: open the field, clear it if needed, type, save."""
    label = FIELD_LABEL[lang][field]
    clear, save = ("清除", "完成") if lang == "zh" else ("Clear", "Save")
    return [
        Tap(Target(label, "link")),
        When(_has_text(label), Tap(Target(clear, "button", exact=True))),
        Fill(Target(label, "textbox", exact=True), value),
        Tap(Target(save, "button", exact=True)),
    ]


class _EditProfile(SettingsTemplate):
    def plan(self, p, lang):
        return [_page("account", lang), *_edit_field(p["field"], p["value"], lang), Finish()]

    def success(self, p, state, answer, lang):
        return state["profile"][p["field"]] == p["value"] and not state["account_deleted"]


class EditName(_EditProfile):
    template_id = "settings.edit_name"
    NAMES = {"en": ["Jamie Morgan", "Alex M.", "Sam T. Taylor"], "zh": ["小明", "晓雨", "老王"]}

    def sample_params(self, data, rng, lang):
        return {"field": "name", "value": rng.choice(self.NAMES[lang])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把我的昵称改成“{p['value']}”。"
        return f'Change my profile name to "{p["value"]}".'


class EditContact(_EditProfile):
    template_id = "settings.edit_contact"
    NEW = {
        "en": {
            "email": ["me.new@example.com", "hello.alex@example.org"],
            "phone": ["(206) 555-0148", "(617) 555-0172"],
        },
        "zh": {
            "email": ["newmail@example.com", "work.li@example.org"],
            "phone": ["13912345678", "18600001111"],
        },
    }

    def sample_params(self, data, rng, lang):
        field = rng.choice(["email", "phone"])
        return {"field": field, "value": rng.choice(self.NEW[lang][field])}

    def instruction(self, p, lang):
        if lang == "zh":
            what = "手机号" if p["field"] == "phone" else "邮箱"
            return f"在账号与安全里把{what}改成{p['value']}。"
        what = "phone number" if p["field"] == "phone" else "email address"
        return f"Update my account {what} to {p['value']}."


class UpdateContactDetails(SettingsTemplate):
    """Two profile fields in one task (the longest settings flow)."""

    template_id = "settings.update_contact_details"

    def sample_params(self, data, rng, lang):
        new = EditContact.NEW[lang]
        return {"email": rng.choice(new["email"]), "phone": rng.choice(new["phone"])}

    def instruction(self, p, lang):
        if lang == "zh":
            return f"把账号的邮箱改成{p['email']}，手机号改成{p['phone']}。"
        return f"Update my account: email {p['email']} and phone number {p['phone']}."

    def plan(self, p, lang):
        return [
            _page("account", lang),
            *_edit_field("email", p["email"], lang),
            *_edit_field("phone", p["phone"], lang),
            Finish(),
        ]

    def success(self, p, state, answer, lang):
        prof = state["profile"]
        return prof["email"] == p["email"] and prof["phone"] == p["phone"]


class AccountPhone(SettingsTemplate):
    template_id = "settings.account_phone"

    def sample_params(self, data, rng, lang):
        return {}

    def instruction(self, p, lang):
        return "我的账号绑定的手机号是多少？" if lang == "zh" else "What phone number is on my account?"

    def plan(self, p, lang):
        pattern = re.compile(r"1[3-9]\d{9}" if lang == "zh" else r"\(\d{3}\) 555-\d{4}")
        label = "手机号" if lang == "zh" else "Phone number"

        def read(obs: Observation) -> str:
            for e in obs.elements:
                if e.role == "link" and e.name.startswith(label):
                    m = pattern.search(e.name)
                    if m:
                        return m.group(0)
            return ""

        return [_page("account", lang), Answer(read)]

    def success(self, p, state, answer, lang):
        return _digits(answer) != "" and _digits(answer) == _digits(state["profile"]["phone"])


class Storage(SettingsTemplate):
    template_id = "settings.storage"

    def sample_params(self, data, rng, lang):
        return {}

    def instruction(self, p, lang):
        return "手机已经用了多少存储空间？" if lang == "zh" else "How much storage is used on this phone?"

    def plan(self, p, lang):
        pattern = re.compile(r"已用 ([\d.]+) GB" if lang == "zh" else r"([\d.]+) GB used")

        def read(obs: Observation) -> str:
            m = pattern.search(obs.a11y_tree)
            return f"{m.group(1)} GB" if m else ""

        return [_page("about", lang), Answer(read)]

    def success(self, p, state, answer, lang):
        m = re.search(r"\d+(?:\.\d+)?", answer or "")
        return bool(m) and float(m.group(0)) == state["device"]["storage_used_gb"]


TEMPLATES = [
    WiFi(),
    Bluetooth(),
    DarkMode(),
    Notification(),
    Privacy(),
    SearchToggle(),
    FontSize(),
    Language(),
    EditName(),
    EditContact(),
    UpdateContactDetails(),
    AccountPhone(),
    Storage(),
]
