"""Capabilities: local Chromium phones, and a farm's capabilities file (every field, every error).

No server is needed: these check the dicts handed to Appium. That Appium and
chromedriver accept the Chromium ones is shown by test_mobile_env.py, which
opens sessions with them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawlers.capabilities import (
    DEFAULT_NEW_COMMAND_TIMEOUT_S,
    LOOPBACK_ONLY_ARGS,
    USER_AGENTS,
    DeviceFileError,
    DeviceSpec,
    build_capabilities,
    chromium_device,
    load_devices,
)
from crawlers.randomise import MOBILE_PROFILES
from schemas.records import DeviceProfile

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "devices.yaml"


# ---------------------------------------------------------------------- Chromium phones
@pytest.mark.parametrize("name", sorted(MOBILE_PROFILES))
def test_chromium_capabilities_emulate_the_profile(name):
    spec = chromium_device(name)
    caps = build_capabilities(spec, chromedriver_port=45123)
    p = MOBILE_PROFILES[name]
    assert spec.kind == "chromium" and spec.platform == "mobile_web" and spec.profile == p
    assert caps["platformName"] == "linux"
    assert caps["browserName"] == "chrome"  # chromedriver rejects "chromium"
    assert caps["appium:automationName"] == "Chromium"
    assert caps["appium:executable"] == "/usr/bin/chromedriver"
    assert caps["appium:chromedriverPort"] == 45123
    assert caps["appium:newCommandTimeout"] == DEFAULT_NEW_COMMAND_TIMEOUT_S
    opts = caps["goog:chromeOptions"]
    assert opts["binary"] == "/usr/bin/chromium"
    assert opts["mobileEmulation"]["deviceMetrics"] == {
        "width": p.viewport_width,
        "height": p.viewport_height,
        "pixelRatio": p.pixel_ratio,
        "touch": True,
    }
    ua = opts["mobileEmulation"]["userAgent"]
    assert ua == USER_AGENTS[name]
    assert ("iPhone" in ua) == (name == "iphone_15") and ("Android" in ua) == (name != "iphone_15")
    args = opts["args"]
    assert args[0] == "--headless=new" and "--no-sandbox" in args
    assert LOOPBACK_ONLY_ARGS[0] in args
    assert "--proxy-bypass-list=<-loopback>;127.0.0.1;localhost" in args
    assert f"--lang={p.locale}" in args


def test_chromium_headful_extra_hosts_and_extras_merge():
    spec = chromium_device(
        "pixel_8",
        capabilities={
            "goog:chromeOptions": {"args": ["--force-dark-mode"], "prefs": {"a.b": 1}},
            "appium:newCommandTimeout": 30,
        },
    )
    caps = build_capabilities(
        spec, chromedriver_port=1, headless=False, allow_hosts=("10.1.2.3", "sandbox.lan")
    )
    args = caps["goog:chromeOptions"]["args"]
    assert "--headless=new" not in args
    assert args[-1] == "--force-dark-mode"  # lists extend
    assert "--proxy-bypass-list=<-loopback>;127.0.0.1;localhost;10.1.2.3;sandbox.lan" in args
    assert caps["goog:chromeOptions"]["prefs"] == {"intl.accept_languages": "en-US", "a.b": 1}
    assert caps["goog:chromeOptions"]["mobileEmulation"]["deviceMetrics"]["width"] == 412
    assert caps["appium:newCommandTimeout"] == 30  # scalars replace
    # Building twice gives equal, independent dicts.
    again = build_capabilities(
        spec, chromedriver_port=1, headless=False, allow_hosts=("10.1.2.3", "sandbox.lan")
    )
    assert again == caps and again["goog:chromeOptions"] is not caps["goog:chromeOptions"]


def test_chromium_device_rejects_unknown_profiles_and_specs_check_their_kind():
    with pytest.raises(KeyError, match="unknown mobile profile 'galaxy'.*pixel_8"):
        chromium_device("galaxy")
    with pytest.raises(ValueError, match="kind='windows'"):
        DeviceSpec(name="x", kind="windows", profile=MOBILE_PROFILES["pixel_8"])


def test_phone_capabilities_by_driver():
    android = DeviceSpec(
        name="a",
        kind="android",
        profile=MOBILE_PROFILES["pixel_8"],
        capabilities={"appium:udid": "emulator-5554"},
    )
    caps = build_capabilities(android, chromedriver_port=45001)
    assert caps == {
        "platformName": "Android",
        "appium:automationName": "UiAutomator2",
        "appium:noReset": True,
        "appium:newCommandTimeout": DEFAULT_NEW_COMMAND_TIMEOUT_S,
        "appium:chromedriverPort": 45001,
        "appium:udid": "emulator-5554",
    }
    assert android.platform == "android"
    ios = DeviceSpec(
        name="i",
        kind="ios",
        profile=MOBILE_PROFILES["iphone_15"],
        capabilities={"appium:udid": "0000-1", "appium:noReset": False},
    )
    caps = build_capabilities(ios, chromedriver_port=45002)
    assert caps == {
        "platformName": "iOS",
        "appium:automationName": "XCUITest",
        "appium:noReset": False,
        "appium:newCommandTimeout": DEFAULT_NEW_COMMAND_TIMEOUT_S,
        "appium:udid": "0000-1",
    }
    assert ios.platform == "ios"


# ---------------------------------------------------------------------- the sample file
def test_example_file_loads_every_field():
    specs = {s.name: s for s in load_devices(EXAMPLE)}
    assert list(specs) == [
        "pixel_7_lab",
        "xiaomi_14_lab",
        "iphone_15_mac",
        "pixel_8",
        "iphone_15",
        "cn_android_large",
    ]
    pixel = specs["pixel_7_lab"]
    assert pixel.kind == "android" and pixel.server_url == "http://10.0.0.21:4723"
    assert pixel.capabilities == {
        "appium:udid": "35111FDH2000AB",
        "appium:deviceName": "Pixel 7",
        "appium:platformVersion": "14",
        "appium:systemPort": 8201,
        "appium:disableWindowAnimation": True,
    }
    assert pixel.profile == DeviceProfile(
        name="pixel_7_lab",
        viewport_width=412,
        viewport_height=915,
        pixel_ratio=2.625,
        is_mobile=True,
        locale="en-US",
    )
    assert pixel.apps == {"settings": "com.android.settings", "contacts": "com.google.android.contacts"}
    xiaomi = build_capabilities(specs["xiaomi_14_lab"], chromedriver_port=9)
    assert xiaomi["appium:appPackage"] == "com.android.settings"
    assert xiaomi["appium:appActivity"] == ".Settings"
    assert xiaomi["appium:language"] == "zh" and xiaomi["appium:locale"] == "CN"
    assert specs["xiaomi_14_lab"].profile.locale == "zh-CN"
    iphone = specs["iphone_15_mac"]
    assert iphone.server_url == "http://10.0.0.42:4723"  # its own Mac host
    caps = build_capabilities(iphone, chromedriver_port=9)
    assert caps["platformName"] == "iOS" and caps["appium:automationName"] == "XCUITest"
    assert caps["appium:bundleId"] == "com.apple.Preferences"
    assert caps["appium:wdaLocalPort"] == 8101
    assert caps["appium:platformVersion"] == "17.5"
    assert caps["appium:xcodeOrgId"] == "ABCDE12345"
    assert iphone.profile == MOBILE_PROFILES["iphone_15"]
    for name in ("pixel_8", "iphone_15", "cn_android_large"):
        assert specs[name].kind == "chromium" and specs[name].server_url is None  # local server
        assert specs[name].profile == MOBILE_PROFILES[name]


def test_remaining_fields_and_json(tmp_path):
    path = tmp_path / "farm.json"
    path.write_text(
        json.dumps(
            {
                "devices": [
                    {
                        "name": "sim",
                        "kind": "ios",
                        "udid": "ABC-1",
                        "profile": "iphone_15",
                        "no_reset": False,
                        "new_command_timeout": 600,
                    },
                    {
                        "name": "emu",
                        "kind": "android",
                        "udid": "emulator-5554",
                        "profile": "pixel_8",
                        "platform_version": 14,
                        "server_url": "https://farm.example:443/wd/hub/",
                    },
                    {
                        "name": "pixel_8",
                        "kind": "chromium",
                        "user_agent": "Custom UA",
                        "apps": {"shop": "/mobile_shop/"},
                    },
                ]
            }
        )
    )
    sim, emu, chromium = load_devices(path)
    assert sim.server_url is None
    assert sim.capabilities == {
        "appium:udid": "ABC-1",
        "appium:noReset": False,
        "appium:newCommandTimeout": 600,
    }
    assert build_capabilities(sim, chromedriver_port=1)["appium:noReset"] is False
    assert emu.capabilities["appium:platformVersion"] == "14"  # an int becomes a string
    assert emu.server_url == "https://farm.example:443/wd/hub"
    assert chromium.apps == {"shop": "/mobile_shop/"}
    ua = build_capabilities(chromium, chromedriver_port=1)["goog:chromeOptions"]["mobileEmulation"][
        "userAgent"
    ]
    assert ua == "Custom UA"


def test_same_udid_on_two_servers_is_two_phones(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("""
devices:
  - {name: a, kind: android, udid: X1, profile: pixel_8, server_url: "http://h1:4723"}
  - {name: b, kind: android, udid: X1, profile: pixel_8, server_url: "http://h2:4723"}
""")
    assert [s.name for s in load_devices(path)] == ["a", "b"]


# ---------------------------------------------------------------------- errors
_ANDROID = "{name: p1, kind: android, udid: U1, profile: pixel_8"
_IOS = "{name: i1, kind: ios, udid: I1, profile: iphone_15"

BAD_DEVICES = [
    # (devices list body, device label, field, message fragment)
    ("- {kind: android, udid: U1, profile: pixel_8}", "device #1", "name", "required"),
    ("- {name: 'bad name', kind: android}", "device 'bad name' (#1)", "name", "letters, digits"),
    ("- {name: p1, kind: symbian}", "device 'p1' (#1)", "kind", "'symbian' is not one of"),
    (f"- {_ANDROID}, udi: U2}}", "device 'p1' (#1)", "udi", "unknown for android devices"),
    (f"- {_IOS}, app_package: com.x.y}}", "device 'i1' (#1)", "app_package", "applies to android devices"),
    (f"- {_ANDROID}, bundle_id: com.x.y}}", "device 'p1' (#1)", "bundle_id", "applies to ios devices"),
    (
        "- {name: p1, kind: chromium, profile: pixel_8, udid: U1}",
        "device 'p1' (#1)",
        "udid",
        "unknown for chromium devices",
    ),
    (
        "- {name: p1, kind: android, profile: pixel_8}",
        "device 'p1' (#1)",
        "udid",
        "required for android devices",
    ),
    ("- {name: i1, kind: ios, profile: iphone_15}", "device 'i1' (#1)", "udid", "required for ios devices"),
    (f"- {_ANDROID}, platform_version: 14.10}}", "device 'p1' (#1)", "platform_version", "quoted string"),
    (f"- {_ANDROID}, device_name: ''}}", "device 'p1' (#1)", "device_name", "non-empty string"),
    (f"- {_ANDROID}, no_reset: 'yes'}}", "device 'p1' (#1)", "no_reset", "true or false"),
    (
        f"- {_ANDROID}, new_command_timeout: 0}}",
        "device 'p1' (#1)",
        "new_command_timeout",
        "positive integer",
    ),
    (f"- {_ANDROID}, system_port: 80}}", "device 'p1' (#1)", "system_port", "outside 1024-65535"),
    (f"- {_IOS}, wda_local_port: '8100'}}", "device 'i1' (#1)", "wda_local_port", "positive integer"),
    (
        f"- {_ANDROID}, app_package: 'not a package'}}",
        "device 'p1' (#1)",
        "app_package",
        "not an Android package",
    ),
    (f"- {_ANDROID}, app_activity: .Main}}", "device 'p1' (#1)", "app_activity", "needs app_package"),
    (f"- {_IOS}, bundle_id: Settings}}", "device 'i1' (#1)", "bundle_id", "not an iOS bundle id"),
    (f"- {_ANDROID}, capabilities: {{udid: U1}}}}", "device 'p1' (#1)", "capabilities.udid", "appium:udid"),
    (
        f"- {_ANDROID}, capabilities: {{'appium:udid': U9}}}}",
        "device 'p1' (#1)",
        "udid",
        "also given as capabilities.appium:udid",
    ),
    (f"- {_ANDROID}, capabilities: [a]}}", "device 'p1' (#1)", "capabilities", "mapping"),
    (
        "- {name: p1, kind: android, udid: U1, profile: galaxy}",
        "device 'p1' (#1)",
        "profile",
        "unknown profile 'galaxy'",
    ),
    ("- {name: p1, kind: android, udid: U1}", "device 'p1' (#1)", "profile", "required"),
    (
        "- {name: p1, kind: android, udid: U1, profile: {viewport_width: 0, viewport_height: 800}}",
        "device 'p1' (#1)",
        "profile.viewport_width",
        "greater than 0",
    ),
    (
        "- {name: p1, kind: android, udid: U1, profile: {viewport_width: 400, viewport_height: 800, dpi: 3}}",
        "device 'p1' (#1)",
        "profile.dpi",
        "unknown",
    ),
    ("- {name: phone, kind: chromium}", "device 'phone' (#1)", "profile", "required"),
    (
        "- {name: phone, kind: chromium, profile: {viewport_width: 1, viewport_height: 1}}",
        "device 'phone' (#1)",
        "profile",
        "takes a profile name",
    ),
    (
        f"- {_ANDROID}, apps: {{shop: 'Shop App'}}}}",
        "device 'p1' (#1)",
        "apps.shop",
        "not an Android package",
    ),
    (f"- {_ANDROID}, apps: [com.x.y]}}", "device 'p1' (#1)", "apps", "mapping"),
    (f"- {_ANDROID}, server_url: 'ftp://farm'}}", "device 'p1' (#1)", "server_url", "not an http(s) URL"),
    (
        "- {name: pixel_8, kind: chromium, user_agent: ''}",
        "device 'pixel_8' (#1)",
        "user_agent",
        "non-empty string",
    ),
    (
        f"- {_ANDROID}}}\n- {{name: p1, kind: chromium, profile: pixel_8}}",
        "device 'p1' (#2)",
        "name",
        "already used by device #1",
    ),
    (
        f"- {_ANDROID}}}\n- {{name: p2, kind: android, udid: U1, profile: pixel_8}}",
        "device 'p2' (#2)",
        "udid",
        "also used by device 'p1' on the same server",
    ),
    (
        f"- {_ANDROID}, system_port: 8201}}\n- {{name: p2, kind: android, udid: U2, "
        "profile: pixel_8, system_port: 8201}",
        "device 'p2' (#2)",
        "system_port",
        "also used by device 'p1'",
    ),
    (
        f"- {_IOS}, wda_local_port: 8101}}\n- {{name: i2, kind: ios, udid: I2, profile: iphone_15}}",
        "device 'i2' (#2)",
        "wda_local_port",
        "several iOS devices share a server",
    ),
    ("- just-a-string", "device #1", None, "expected a mapping"),
]


@pytest.mark.parametrize(
    "body,label,fld,fragment", BAD_DEVICES, ids=[f"{i}-{b[2]}" for i, b in enumerate(BAD_DEVICES)]
)
def test_bad_devices_name_file_device_and_field(tmp_path, body, label, fld, fragment):
    path = tmp_path / "farm.yaml"
    path.write_text("devices:\n" + "\n".join("  " + line for line in body.splitlines()) + "\n")
    with pytest.raises(DeviceFileError) as info:
        load_devices(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: {label}: "), msg
    if fld is not None:
        assert f"field '{fld}'" in msg, msg
    assert fragment in msg, msg


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("devices: [", "not valid YAML"),
        ("- {name: a}", "expected a mapping with a 'devices' list"),
        ("server: http://x\ndevices: []", "unknown top-level field(s) ['server']"),
        ("devices: []", "field 'devices': expected a non-empty list"),
        (
            "server_url: localhost:4723\ndevices: [{name: pixel_8, kind: chromium}]",
            "field 'server_url': 'localhost:4723' is not an http(s) URL",
        ),
    ],
)
def test_bad_files(tmp_path, text, fragment):
    path = tmp_path / "farm.yaml"
    path.write_text(text)
    with pytest.raises(DeviceFileError, match="^" + str(path).replace(".", r"\.")) as info:
        load_devices(path)
    assert fragment in str(info.value)


def test_missing_and_bad_json_files(tmp_path):
    with pytest.raises(DeviceFileError, match="cannot read the capabilities file"):
        load_devices(tmp_path / "absent.yaml")
    bad = tmp_path / "farm.json"
    bad.write_text("{devices: []}")
    with pytest.raises(DeviceFileError, match="farm.json: not valid JSON"):
        load_devices(bad)
