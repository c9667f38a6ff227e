"""Partitions: web crawls are partitioned by sandbox app.

Crawl assets carry a single-run backfill policy, so one run (and one browser)
can crawl a whole range of apps: `--partition-range mail...social`.
"""
import dagster as dg

WEB_APPS = ["mail", "notes", "settings", "shop", "social"]
web_app_partitions = dg.StaticPartitionsDefinition(WEB_APPS)
ALL_WEB_APPS_RANGE = f"{WEB_APPS[0]}...{WEB_APPS[-1]}"
