"""Devices to crawl on and the Appium capabilities that open a session on them.

Three kinds of device:

- "chromium": a phone emulated by the local Chromium (mobile emulation: the
  profile's CSS viewport and pixel ratio, touch events, a phone user agent),
  driven through appium-chromium-driver. Its network is loopback only.
- "android": a real phone or emulator through UiAutomator2.
- "ios": a real iPhone or simulator through XCUITest.

Local Chromium phones come from `chromium_device(name)` (MOBILE_PROFILES);
phones of a farm come from a capabilities file read by `load_devices(path)`
(format in docs/device_farm.md, sample in examples/devices.yaml).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import yaml
from pydantic import ValidationError

from schemas.records import DeviceProfile

from .browser import CHROMIUM_ARGS
from .randomise import MOBILE_PROFILES

__all__ = [
    "DeviceSpec",
    "DeviceFileError",
    "chromium_device",
    "load_devices",
    "build_capabilities",
    "USER_AGENTS",
    "LOOPBACK_ONLY_ARGS",
]

DeviceKind = Literal["chromium", "android", "ios"]
KINDS = ("chromium", "android", "ios")
PLATFORMS = {"chromium": "mobile_web", "android": "android", "ios": "ios"}

CHROMIUM_BINARY = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# Appium ends a session that receives no command for this long: a crawler that
# died never leaves a phone locked.
DEFAULT_NEW_COMMAND_TIMEOUT_S = 120

# Chrome on Android sends the reduced user agent (model "K") since Chrome 110,
# whatever the phone; Safari on iOS 17 is the iPhone's own.
_ANDROID_UA = (
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/130.0.0.0 Mobile Safari/537.36"
)
_IPHONE_UA = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
)
USER_AGENTS = {"pixel_8": _ANDROID_UA, "cn_android_large": _ANDROID_UA, "iphone_15": _IPHONE_UA}

# Every request goes to a proxy that does not exist (port 9, discard), except
# loopback: the emulated phone reaches the sandbox and nothing else.
# `<-loopback>` drops Chromium's implicit bypass so only the hosts named pass.
LOOPBACK_ONLY_ARGS = [
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>;127.0.0.1;localhost",
]

# W3C capabilities need no vendor prefix; everything else does (appium:..., goog:...).
_W3C_CAPS = {
    "browserName",
    "browserVersion",
    "platformName",
    "acceptInsecureCerts",
    "pageLoadStrategy",
    "proxy",
    "setWindowRect",
    "timeouts",
    "strictFileInteractability",
    "unhandledPromptBehavior",
    "webSocketUrl",
    "userAgent",
}


@dataclass(frozen=True)
class DeviceSpec:
    """One device a session can be opened on.

    `capabilities` are extras merged over what `build_capabilities` derives
    (dicts merge, lists extend): appium:udid, appium:deviceName... for phones.
    `apps` maps an app name (as tasks say it) to its Android package, iOS
    bundle id, or on a Chromium phone a URL or sandbox path.
    `server_url` None means the pool's own (local) Appium server.
    """

    name: str
    kind: DeviceKind
    profile: DeviceProfile
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_url: str | None = None
    apps: dict[str, str] = field(default_factory=dict)
    user_agent: str | None = None  # Chromium phones; None: USER_AGENTS[profile.name]

    def __post_init__(self):
        if not self.name:
            raise ValueError("DeviceSpec.name must not be empty")
        if self.kind not in KINDS:
            raise ValueError(f"DeviceSpec {self.name!r}: kind={self.kind!r}, expected one of {KINDS}")

    @property
    def platform(self) -> str:
        """The trajectory platform it records: mobile_web, android or ios."""
        return PLATFORMS[self.kind]


def chromium_device(profile_name: str, **overrides) -> DeviceSpec:
    """A phone of MOBILE_PROFILES emulated in the local Chromium."""
    if profile_name not in MOBILE_PROFILES:
        raise KeyError(f"unknown mobile profile {profile_name!r}; known: {sorted(MOBILE_PROFILES)}")
    kw = {
        "name": profile_name,
        "kind": "chromium",
        "profile": MOBILE_PROFILES[profile_name],
        "user_agent": USER_AGENTS.get(profile_name, _ANDROID_UA),
    }
    kw.update(overrides)
    return DeviceSpec(**kw)


# ---------------------------------------------------------------------- capabilities
def build_capabilities(
    spec: DeviceSpec, *, chromedriver_port: int, headless: bool = True, allow_hosts: Sequence[str] = ()
) -> dict[str, Any]:
    """W3C capabilities for a new Appium session on `spec`.

    `chromedriver_port` must be unique on the host among live sessions: the
    Chromium driver kills any chromedriver already on that port. On Android
    it is the port for WebView contexts. `allow_hosts` adds hosts the
    Chromium phone may reach besides loopback.
    """
    if spec.kind == "chromium":
        caps = _chromium_caps(spec, chromedriver_port, headless, allow_hosts)
    elif spec.kind == "android":
        caps = {
            "platformName": "Android",
            "appium:automationName": "UiAutomator2",
            "appium:noReset": True,
            "appium:newCommandTimeout": DEFAULT_NEW_COMMAND_TIMEOUT_S,
            "appium:chromedriverPort": chromedriver_port,
        }
    else:
        caps = {
            "platformName": "iOS",
            "appium:automationName": "XCUITest",
            "appium:noReset": True,
            "appium:newCommandTimeout": DEFAULT_NEW_COMMAND_TIMEOUT_S,
        }
    return _merge(caps, copy.deepcopy(spec.capabilities))


def _chromium_caps(
    spec: DeviceSpec, chromedriver_port: int, headless: bool, allow_hosts: Sequence[str]
) -> dict[str, Any]:
    p = spec.profile
    args = (
        (["--headless=new"] if headless else [])
        + list(CHROMIUM_ARGS)
        + [
            LOOPBACK_ONLY_ARGS[0],
            LOOPBACK_ONLY_ARGS[1] + "".join(f";{h}" for h in allow_hosts),
            f"--lang={p.locale}",
        ]
    )
    ua = spec.user_agent or USER_AGENTS.get(p.name, _ANDROID_UA)
    return {
        "platformName": "linux",
        # chromedriver rejects "chromium" as a browser name.
        "browserName": "chrome",
        "appium:automationName": "Chromium",
        "appium:executable": CHROMEDRIVER,
        "appium:chromedriverPort": chromedriver_port,
        "appium:newCommandTimeout": DEFAULT_NEW_COMMAND_TIMEOUT_S,
        # Like the Playwright env: alerts and confirms are dismissed, never block.
        "unhandledPromptBehavior": "dismiss",
        "goog:chromeOptions": {
            "binary": CHROMIUM_BINARY,
            "args": args,
            "prefs": {"intl.accept_languages": p.locale},
            "mobileEmulation": {
                "deviceMetrics": {
                    "width": p.viewport_width,
                    "height": p.viewport_height,
                    "pixelRatio": p.pixel_ratio,
                    "touch": True,
                },
                "userAgent": ua,
            },
        },
    }


def _merge(base: dict, extra: dict) -> dict:
    """`extra` over `base`: nested dicts merge, lists extend, anything else replaces."""
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        elif isinstance(v, list) and isinstance(base.get(k), list):
            base[k] = base[k] + v
        else:
            base[k] = v
    return base


# ---------------------------------------------------------------------- device files
class DeviceFileError(ValueError):
    """A capabilities file is malformed; the message names file, device and field."""


# Friendly fields of the file -> the Appium capability they set, per kind.
_PHONE_FIELDS = {
    "udid": "appium:udid",
    "device_name": "appium:deviceName",
    "platform_version": "appium:platformVersion",
    "no_reset": "appium:noReset",
    "new_command_timeout": "appium:newCommandTimeout",
}
_CAP_FIELDS = {
    "chromium": {},
    "android": {
        **_PHONE_FIELDS,
        "app_package": "appium:appPackage",
        "app_activity": "appium:appActivity",
        "system_port": "appium:systemPort",
    },
    "ios": {**_PHONE_FIELDS, "bundle_id": "appium:bundleId", "wda_local_port": "appium:wdaLocalPort"},
}
_COMMON_FIELDS = {"name", "kind", "profile", "server_url", "apps", "capabilities"}
_EXTRA_FIELDS = {"chromium": {"user_agent"}, "android": set(), "ios": set()}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# An Android package (optionally /activity) or an iOS bundle id.
_APP_ID_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+(/[A-Za-z0-9_.$]+)?$")
_PROFILE_KEYS = {"name", "viewport_width", "viewport_height", "pixel_ratio", "locale", "theme", "font_scale"}


def load_devices(path: str | Path) -> list[DeviceSpec]:
    """Read a YAML or JSON capabilities file (see docs/device_farm.md)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DeviceFileError(f"{path}: cannot read the capabilities file: {e}") from e
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise DeviceFileError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}") from e
    if not isinstance(data, dict):
        raise DeviceFileError(f"{path}: expected a mapping with a 'devices' list at the top")
    unknown = set(data) - {"server_url", "devices"}
    if unknown:
        raise DeviceFileError(
            f"{path}: unknown top-level field(s) {sorted(unknown)}; expected 'server_url' and 'devices'"
        )
    default_url = data.get("server_url")
    if default_url is not None:
        default_url = _server_url(default_url, lambda m: DeviceFileError(f"{path}: field 'server_url': {m}"))
    entries = data.get("devices")
    if not isinstance(entries, list) or not entries:
        raise DeviceFileError(f"{path}: field 'devices': expected a non-empty list of devices")
    specs = [_device(path, i, entry, default_url) for i, entry in enumerate(entries)]
    _check_unique(path, specs)
    return specs


def _device(path: Path, index: int, entry: Any, default_url: str | None) -> DeviceSpec:
    label = f"device #{index + 1}"
    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
        label = f"device {entry['name']!r} (#{index + 1})"

    def err(fld: str, msg: str) -> DeviceFileError:
        return DeviceFileError(f"{path}: {label}: field '{fld}': {msg}")

    if not isinstance(entry, dict):
        raise DeviceFileError(f"{path}: {label}: expected a mapping, got {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise err("name", "required: letters, digits, '_', '.', '-' (it names partitions and files)")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise err("kind", f"{kind!r} is not one of {list(KINDS)}")
    allowed = _COMMON_FIELDS | set(_CAP_FIELDS[kind]) | _EXTRA_FIELDS[kind]
    for key in entry:
        if key not in allowed:
            hint = next(
                (
                    f" ({key!r} applies to {k} devices)"
                    for k in KINDS
                    if key in _CAP_FIELDS[k] or key in _EXTRA_FIELDS[k]
                ),
                "",
            )
            raise err(key, f"unknown for {kind} devices{hint}; allowed: {sorted(allowed)}")

    profile = _profile(entry.get("profile"), name, kind, err)
    caps = entry.get("capabilities", {})
    if not isinstance(caps, dict):
        raise err("capabilities", "expected a mapping of capability names to values")
    for cap in caps:
        if not isinstance(cap, str) or (":" not in cap and cap not in _W3C_CAPS):
            raise err(f"capabilities.{cap}", f"not a W3C capability: give it a vendor prefix (appium:{cap})")
    caps = dict(caps)
    for fld, cap in _CAP_FIELDS[kind].items():
        if fld not in entry:
            continue
        if cap in caps:
            raise err(fld, f"also given as capabilities.{cap}; give it once")
        caps[cap] = _field_value(fld, entry[fld], err)
    if kind != "chromium" and "appium:udid" not in caps:
        raise err("udid", f"required for {kind} devices (adb devices / xcrun xctrace list devices)")
    if kind == "android" and "appium:appActivity" in caps and "appium:appPackage" not in caps:
        raise err("app_activity", "needs app_package too")

    apps = entry.get("apps", {})
    if not isinstance(apps, dict):
        raise err("apps", "expected a mapping of app name to package / bundle id / URL")
    for app, target in apps.items():
        if not isinstance(target, str) or not target:
            raise err(f"apps.{app}", "expected a non-empty string")
        if kind != "chromium" and not _APP_ID_RE.match(target):
            raise err(
                f"apps.{app}",
                f"{target!r} is not an {'Android package' if kind == 'android' else 'iOS bundle id'}",
            )
    url = entry.get("server_url", default_url)
    if entry.get("server_url") is not None:  # an explicit null: the local server
        url = _server_url(entry["server_url"], lambda m: err("server_url", m))
    ua = entry.get("user_agent")
    if ua is not None and (not isinstance(ua, str) or not ua.strip()):
        raise err("user_agent", "expected a non-empty string")
    return DeviceSpec(
        name=name,
        kind=kind,
        profile=profile,
        capabilities=caps,
        server_url=url,
        apps=dict(apps),
        user_agent=ua,
    )


def _field_value(fld: str, value: Any, err) -> Any:
    if fld in ("no_reset",):
        if not isinstance(value, bool):
            raise err(fld, f"expected true or false, got {value!r}")
        return value
    if fld in ("new_command_timeout", "system_port", "wda_local_port"):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise err(fld, f"expected a positive integer, got {value!r}")
        if fld != "new_command_timeout" and not 1024 <= value <= 65535:
            raise err(fld, f"port {value} is outside 1024-65535")
        return value
    if fld == "platform_version":
        if isinstance(value, float):
            # YAML reads 17.10 as the number 17.1: the version would be wrong.
            raise err(
                fld,
                f'give it as a quoted string ("{value}"): YAML reads an unquoted '
                f"version as a number and drops trailing zeros",
            )
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    if not isinstance(value, str) or not value.strip():
        raise err(fld, f"expected a non-empty string, got {value!r}")
    if fld == "app_package" and not _APP_ID_RE.match(value):
        raise err(fld, f"{value!r} is not an Android package name (like com.android.settings)")
    if fld == "bundle_id" and not _APP_ID_RE.match(value):
        raise err(fld, f"{value!r} is not an iOS bundle id (like com.apple.Preferences)")
    return value


def _profile(value: Any, name: str, kind: str, err) -> DeviceProfile:
    if value is None:
        if kind == "chromium" and name in MOBILE_PROFILES:
            return MOBILE_PROFILES[name]
        raise err(
            "profile",
            f"required: one of {sorted(MOBILE_PROFILES)} or a mapping with "
            f"viewport_width, viewport_height, pixel_ratio",
        )
    if isinstance(value, str):
        if value not in MOBILE_PROFILES:
            raise err("profile", f"unknown profile {value!r}; known: {sorted(MOBILE_PROFILES)}")
        return MOBILE_PROFILES[value]
    if kind == "chromium":
        raise err("profile", f"a Chromium phone takes a profile name: {sorted(MOBILE_PROFILES)}")
    if not isinstance(value, dict):
        raise err("profile", "expected a profile name or a mapping")
    unknown = set(value) - _PROFILE_KEYS
    if unknown:
        raise err(f"profile.{sorted(unknown)[0]}", f"unknown; allowed: {sorted(_PROFILE_KEYS)}")
    try:
        return DeviceProfile(**{"name": name, "is_mobile": True, **value})
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise err(f"profile.{loc}", first["msg"]) from None


def _server_url(value: Any, err) -> str:
    u = urlparse(value) if isinstance(value, str) else None
    if u is None or u.scheme not in ("http", "https") or not u.hostname:
        raise err(f"{value!r} is not an http(s) URL of an Appium server")
    return value.rstrip("/")


def _check_unique(path: Path, specs: list[DeviceSpec]) -> None:
    names: dict[str, int] = {}
    for i, s in enumerate(specs):
        if s.name in names:
            raise DeviceFileError(
                f"{path}: device {s.name!r} (#{i + 1}): field 'name': "
                f"already used by device #{names[s.name] + 1}"
            )
        names[s.name] = i
    # On one server, two sessions must not share a phone or a port.
    per_server: dict[tuple[str | None, str, Any], str] = {}
    for i, s in enumerate(specs):
        for fld, cap in (
            ("udid", "appium:udid"),
            ("system_port", "appium:systemPort"),
            ("wda_local_port", "appium:wdaLocalPort"),
        ):
            if cap not in s.capabilities:
                continue
            key = (s.server_url, cap, s.capabilities[cap])
            if key in per_server:
                raise DeviceFileError(
                    f"{path}: device {s.name!r} (#{i + 1}): field '{fld}': "
                    f"{s.capabilities[cap]!r} is also used by device {per_server[key]!r} "
                    f"on the same server"
                )
            per_server[key] = s.name
    # XCUITest talks to each phone's WebDriverAgent on wdaLocalPort (8100 by
    # default): two iPhones on one server need their own.
    ios_by_server: dict[str | None, list[DeviceSpec]] = {}
    for s in specs:
        if s.kind == "ios":
            ios_by_server.setdefault(s.server_url, []).append(s)
    for group in ios_by_server.values():
        if len(group) > 1:
            for s in group:
                if "appium:wdaLocalPort" not in s.capabilities:
                    i = specs.index(s)
                    raise DeviceFileError(
                        f"{path}: device {s.name!r} (#{i + 1}): field 'wda_local_port': required "
                        f"when several iOS devices share a server"
                    )
