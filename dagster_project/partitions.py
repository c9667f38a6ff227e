"""Partitions: web crawls by sandbox app, mobile crawls by app x device profile.

Crawl assets carry a single-run backfill policy, so one run (one browser, one
Appium device pool) can crawl a whole range: `--partition-range mail...social`
for the web, and for mobile the range over every app|device key (multi-partition
keys sort by dimension name, "app" before "device").

A mobile partition holds the app's tasks whose episode seed draws that device
profile (crawlers.randomise.profile_for_task), so the partitions split the
catalog: every task is crawled once, on one phone, and the union of an app's
partitions is the app's whole catalog.
"""

import dagster as dg

from crawlers.randomise import MOBILE_PROFILES

WEB_APPS = ["mail", "notes", "settings", "shop", "social"]
MOBILE_APPS = ["delivery", "mobile_shop", "mobile_social"]
MOBILE_DEVICES = sorted(MOBILE_PROFILES)

web_app_partitions = dg.StaticPartitionsDefinition(WEB_APPS)
ALL_WEB_APPS_RANGE = f"{WEB_APPS[0]}...{WEB_APPS[-1]}"

mobile_partitions = dg.MultiPartitionsDefinition(
    {
        "app": dg.StaticPartitionsDefinition(MOBILE_APPS),
        "device": dg.StaticPartitionsDefinition(MOBILE_DEVICES),
    }
)
ALL_MOBILE_RANGE = f"{MOBILE_APPS[0]}|{MOBILE_DEVICES[0]}...{MOBILE_APPS[-1]}|{MOBILE_DEVICES[-1]}"
