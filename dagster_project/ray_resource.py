"""Where the crawl's browsers run when they run on Ray.

The crawl asset reads it from its `browser` resource (`ray_address`,
`ray_actors`; RayResource.for_browser) rather than from a resource key of its
own, so every resource dict that materialises the asset (tests, benchmarks)
keeps working unchanged. RayResource is also a ConfigurableResource for
assets that want it under its own key.

Unset (the default, `make demo`): the crawl assets use local browsers
(WebEnvPool) and Ray is never imported. `address` set (or $TRAJFORGE_RAY_ADDRESS: "auto", "ray://head:10001",
"127.0.0.1:6379"): the assets connect to that cluster with the plain Ray
client and play on a RayEnvPool of `actors` browser actors (each takes one
unit of the `browser` resource; see docs/operations.md). `local: true` starts
a one-machine Ray for a demo or a test (its `browsers` resource declared here).
Phones are separate: the mobile crawl plays on Ray only when the Appium resource
names a cluster (`ray_address`, or $TRAJFORGE_APPIUM_RAY_ADDRESS), since a cluster
that runs browsers need not host phones; its actors take `device:<profile>`.
"""

from __future__ import annotations

import os

import dagster as dg
from pydantic import Field


class RayResource(dg.ConfigurableResource):
    address: str = ""
    local: bool = False
    actors: int = Field(default=4, ge=1)  # browser actors of the pool
    local_browsers: int = Field(default=4, ge=1)  # the `browser` resource of a local Ray

    @classmethod
    def for_browser(cls, browser) -> RayResource:
        """The Ray settings of a BrowserResource (`ray_address`, else
        $TRAJFORGE_RAY_ADDRESS; unset: no Ray) and its `ray_actors`."""
        return cls(
            address=browser.ray_address or os.environ.get("TRAJFORGE_RAY_ADDRESS", ""),
            actors=browser.ray_actors,
        )

    @classmethod
    def for_appium(cls, appium) -> RayResource:
        """The Ray settings of an AppiumResource (`ray_address`, else
        $TRAJFORGE_APPIUM_RAY_ADDRESS; unset: the local DevicePool)."""
        return cls(address=appium.ray_address or os.environ.get("TRAJFORGE_APPIUM_RAY_ADDRESS", ""))

    @property
    def enabled(self) -> bool:
        return bool(self.address) or self.local

    def connect(self) -> None:
        import ray

        if ray.is_initialized():
            return
        if self.address:
            ray.init(address=self.address, log_to_driver=False)
        else:
            ray.init(
                num_cpus=2,
                resources={"browser": self.local_browsers},
                include_dashboard=False,
                log_to_driver=False,
            )

    def browser_pool(self, browser, request_filter):
        """A pool of browsers for the crawl: local (WebEnvPool) unless Ray is set."""
        launch = dict(
            headless=browser.headless,
            executable_path=browser.executable_path,
            image_format=browser.image_format,
            step_timeout_s=browser.step_timeout_s,
            request_filter=request_filter,
        )
        if not self.enabled:
            from crawlers.crawl_browser_pool import WebEnvPool

            return WebEnvPool(browser.browsers, **launch)
        self.connect()
        from crawlers.ray_pool import RayEnvPool

        return RayEnvPool(self.actors, **launch)

    def device_pool(self, appium, devices: list):
        """`appium.sessions` Appium sessions per device as Ray actors, each taking one unit of
        `device:<its profile>`; the Appium server is `appium.url` as the phone hosts reach it."""
        self.connect()
        from crawlers.ray_pool import AppiumSessionFactory, RayEnvPool

        factory = AppiumSessionFactory(
            appium.url, step_timeout_s=appium.step_timeout_s, screenshot_scale=appium.screenshot_scale
        )
        return RayEnvPool(len(devices) * appium.sessions, devices=devices, factory=factory)
