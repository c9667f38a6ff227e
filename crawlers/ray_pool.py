"""A pool of envs as Ray actors across nodes, with WebEnvPool's interface.

`RayEnvPool(size)` keeps `size` actors (crawlers/ray_actor.EnvActor), each
holding one env: a browser (WebEnv.launch(**launch_kw)) or, with `factory=`,
any env such as an Appium MobileEnv. Each actor asks for one unit of a custom
resource (`browser`, or `device:<profile>`), so Ray places it only on a node
that declares it (`ray start --resources '{"browser": 8}'`).

`submit(fn, *args)` runs `fn` on one of `size` driver threads; inside it,
`lease()` hands out a free actor's env as a RemoteEnv proxy. The episode loop,
the policy and the Recorder stay on the driver and each env call is one actor
hop, so the trajectories are the ones a local pool records (same ids, same
outcomes) and "0 lost, 0 duplicated" is the Recorder's own guarantee: one
writer claims every id once and writes each trajectory whole; an actor never
writes. An actor that is lost (its node died, ActorDiedError) surfaces as
ActorLost (a BrowserCrashed): the crawl replays the episode whole on another
lease, and the pool starts a replacement actor, which Ray schedules when a
node with the resource is free (until then the pool runs on fewer actors).

`crawl(..., pool=RayEnvPool(4, request_filter=Allowlist([url])))`, and the
same for crawl_environment and, through the Gym API, training.rollouts.rejection_sample and
training.online; `ray.init` is called (address=None: a local Ray) unless Ray is
already initialised.

Desktops: `RayEnvPool(n, factory=DesktopEnvFactory(environment))` gives each actor a
DesktopEnv of a `platform: desktop` file (its own X server, bus and app on the
actor's node) and takes one unit of `desktop`.

Phones: `RayEnvPool(n, devices=[spec, ...], factory=AppiumSessionFactory(url))`
gives slot i the device `devices[i % len(devices)]`; its actor calls
`factory(spec)` (an Appium session through the server at `url`, which must be
reachable from the node) and takes one unit of `device:<spec's profile>` (or of
`resource`, when given), so it runs only on a node that declares that resource:
`ray start --resources '{"device:pixel_8": 2}'` on the host the phones (or
Appium's Chromium) are attached to.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from .device_pool import PoolClosed, PoolError
from .pool_slots import SlotLookup, first_line

log = logging.getLogger(__name__)


@dataclass
class _Slot:
    name: str  # "ray-browser#<n>"
    actor: object | None = None  # the Ray actor handle
    ready: object | None = None  # ObjectRef of its `launch`, until it answered
    env: object | None = None  # RemoteEnv once ready
    node_id: str | None = None
    leased: bool = False
    needs_restart: bool = False
    leases: int = 0
    nodes: set = field(default_factory=set)


class RayEnvPool(SlotLookup):
    """`size` envs as Ray actors; see the module docstring.

    `resource`: the custom resource each actor takes one unit of (default "browser";
    with `devices`, "device:<profile>" of the slot's device; with a DesktopEnvFactory,
    "desktop"). With `devices`, `factory`
    is called with the slot's DeviceSpec (AppiumSessionFactory opens an Appium session).
    `call_timeout_s` bounds one env call (a step's own watchdog ends well
    before); an actor that does not answer is treated as lost.
    `lease_timeout_s`: how long a lease waits for an actor to come up (after
    losses) before it is a PoolError.
    """

    platform = "web"
    profiles = None  # a browser emulates any profile: the seed draws it

    def __init__(
        self,
        size: int,
        *,
        address: str | None = None,
        resource: str | None = None,
        factory: Callable[[], object] | None = None,
        devices: list | None = None,
        call_timeout_s: float = 120.0,
        lease_timeout_s: float = 120.0,
        launch_timeout_s: float = 120.0,
        **launch_kw,
    ):
        if size < 1:
            raise ValueError(f"RayEnvPool: size={size} must be >= 1")
        if factory is not None and launch_kw:
            raise ValueError("RayEnvPool: give factory= or launch keywords, not both")
        if devices is not None and (not devices or factory is None):
            raise ValueError(
                "RayEnvPool: devices= needs at least one DeviceSpec and a factory= "
                "that opens a session on one (AppiumSessionFactory)"
            )
        import ray  # lazily: a crawl without a Ray pool never imports it

        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self._ray = ray
        self.size = size
        resource = resource or getattr(factory, "resource", None)  # DesktopEnvFactory: "desktop"
        self.platform = getattr(factory, "platform", None) or self.platform
        self.resource = resource or (
            f"device:{devices[0].profile.name}"
            if devices and len({d.profile.name for d in devices}) == 1
            else "device:<profile>"
            if devices
            else "browser"
        )
        self._resource = resource
        self.devices = devices
        if devices:
            self.platform = "mobile_web"
            self.profiles = sorted({d.profile.name for d in devices})
        self._factory = factory or _WebEnvFactory(launch_kw)
        self.call_timeout_s = call_timeout_s
        self.lease_timeout_s = lease_timeout_s
        self.launch_timeout_s = launch_timeout_s
        self._cond = threading.Condition()
        self._slot_guard = self._cond
        self._closed = False
        self._threads: ThreadPoolExecutor | None = None
        self._n = {
            "leases": 0,
            "launches": 0,
            "browsers_lost": 0,
            "reconnects": 0,
            "actors_lost": 0,
            "actors_replaced": 0,
            "episodes_replayed": 0,
        }
        self.lost_at: list[float] = []  # time.monotonic() of each actor loss seen
        self._slots = [_Slot(name=f"ray-{self._slot_resource(i)}#{i}") for i in range(size)]
        for slot in self._slots:
            self._start_actor(slot)

    # ------------------------------------------------------------------ work
    def submit(self, fn: Callable, *args) -> Future:
        """Run `fn(*args)` on one of the pool's driver threads (where `lease()` is used)."""
        with self._cond:
            if self._closed:
                raise PoolClosed("this RayEnvPool is closed")
            if self._threads is None:
                self._threads = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="ray-pool")
        return self._threads.submit(fn, *args)

    def launch_all(self) -> None:
        """Wait until every actor has launched its env (a benchmark keeps launches out)."""
        deadline = time.monotonic() + self.launch_timeout_s
        for slot in self._slots:
            while not self._poll_ready(slot):
                if time.monotonic() > deadline:
                    raise PoolError(
                        f"{slot.name}: the env did not launch within {self.launch_timeout_s:.0f}s"
                    )
                time.sleep(0.05)

    @contextmanager
    def lease(self) -> Iterator[object]:
        """A free actor's env (RemoteEnv) for one attempt; blocks until one is free."""
        from .ray_actor import ActorLost
        from .web_env import BrowserCrashed

        slot = self._take_slot()
        env = slot.env
        try:
            if slot.needs_restart or not env.is_alive():
                env.restart()
                with self._cond:
                    self._n["reconnects"] += 1
            slot.needs_restart = False
            with self._cond:
                slot.leases += 1
                self._n["leases"] += 1
                if slot.node_id:
                    slot.nodes.add(slot.node_id)
            yield env
        except ActorLost as e:
            self._actor_lost(slot, e)
            raise
        except BrowserCrashed:
            slot.needs_restart = True
            with self._cond:
                self._n["browsers_lost"] += 1
            raise
        finally:
            with self._cond:
                slot.leased = False
                self._cond.notify_all()

    def stats(self) -> dict:
        """Pool figures as plain JSON types (Dagster metadata).

        `actors_lost`: actors found dead (their node gone); `episodes_replayed`:
        attempts those losses interrupted, played again on another actor;
        `nodes_used`: distinct Ray nodes that ran an episode.
        """
        with self._cond:
            nodes = set().union(*(s.nodes for s in self._slots))
            return {
                "browsers": self.size,
                "slots": self.size,
                **self._n,
                "server_restarts": 0,
                "resource": self.resource,
                "slots_used": sum(1 for s in self._slots if s.leases),
                "actors_live": sum(1 for s in self._slots if s.env is not None),
                "nodes_used": len(nodes),
                "env_calls": sum(s.env.calls for s in self._slots if s.env is not None),
            }

    def slot_nodes(self) -> dict[str, str | None]:
        """Each slot's Ray node id (None while its actor is not up)."""
        with self._cond:
            return {s.name: s.node_id for s in self._slots}

    def slot_pids(self) -> dict[str, int]:
        """Each live actor's worker process id (the browser runs under it)."""
        from .ray_actor import get

        return {
            s.name: get(s.actor.where.remote(), self.call_timeout_s)["pid"]
            for s in self._slots
            if s.env is not None
        }

    def slots(self) -> list[dict]:
        """A snapshot of the slots (for logs and tests), as DevicePool.slots gives it:
        busy = leased now (an episode is playing on it), leases so far, its Ray node."""
        with self._cond:
            return [
                {
                    "slot": s.name,
                    "resource": self._slot_resource(i),
                    "node_id": s.node_id,
                    "busy": s.leased,
                    "connected": s.env is not None,
                    "leases": s.leases,
                }
                for i, s in enumerate(self._slots)
            ]

    def device_of(self, env):
        """The DeviceSpec an Appium slot's env was opened on (a `devices` pool)."""
        i = self._slots.index(self._slot_of(env))
        return self.devices[i % len(self.devices)]

    # ------------------------------------------------------------------ life cycle
    def close(self) -> None:
        """Let submitted work finish, close each env in its actor, end the actors."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        if self._threads is not None:
            self._threads.shutdown(wait=True)
        for slot in self._slots:
            if slot.actor is None:
                continue
            if slot.env is not None:
                try:
                    self._ray.get(slot.actor.shutdown.remote(), timeout=30)
                except Exception as e:  # noqa: BLE001 - the actor or its node may be gone
                    log.debug("%s: shutdown: %s", slot.name, first_line(e))
            self._ray.kill(slot.actor)
            slot.actor = slot.env = slot.ready = None

    def __enter__(self) -> RayEnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _slot_resource(self, i: int) -> str:
        if self._resource or not self.devices:
            return self._resource or "browser"
        return f"device:{self.devices[i % len(self.devices)].profile.name}"

    def _start_actor(self, slot: _Slot) -> None:
        from .ray_actor import remote_actor_class

        i = next(n for n, s in enumerate(self._slots) if s is slot)
        factory = (
            functools.partial(self._factory, self.devices[i % len(self.devices)])
            if self.devices
            else self._factory
        )
        actor = (
            remote_actor_class()
            .options(num_cpus=0, resources={self._slot_resource(i): 1}, max_restarts=0, max_task_retries=0)
            .remote(factory)
        )
        slot.actor, slot.env, slot.node_id = actor, None, None
        slot.ready = actor.launch.remote()

    def _poll_ready(self, slot: _Slot) -> bool:
        """True when the slot's actor is up (its env launched); counts the launch once."""
        from .ray_actor import ActorLost, RemoteEnv, get

        if slot.env is not None:
            return True
        if slot.ready is None:
            return False
        done, _ = self._ray.wait([slot.ready], timeout=0)
        if not done:
            return False
        try:
            get(slot.ready, 0)
            where = get(slot.actor.where.remote(), self.call_timeout_s)
        except ActorLost as e:  # died before it came up: start another
            log.warning("%s: its actor was lost before it launched (%s)", slot.name, e)
            self._start_actor(slot)
            return False
        except Exception as e:
            raise PoolError(f"{slot.name}: the env did not launch in its Ray actor: {first_line(e)}") from e
        slot.env = RemoteEnv(slot.actor, self.call_timeout_s, slot.name)
        slot.node_id, slot.ready = where["node_id"], None
        self._n["launches"] += 1
        return True

    def _take_slot(self) -> _Slot:
        deadline = time.monotonic() + self.lease_timeout_s
        with self._cond:
            while True:
                if self._closed:
                    raise PoolClosed("this RayEnvPool is closed")
                for slot in sorted(self._slots, key=lambda s: s.leases):
                    if not slot.leased and self._poll_ready(slot):
                        slot.leased = True
                        return slot
                if time.monotonic() > deadline:
                    raise PoolError(
                        f"no Ray actor with a free '{self.resource}' came up within "
                        f"{self.lease_timeout_s:.0f}s (is a node with that resource "
                        f"in the cluster? {self._ray.cluster_resources()})"
                    )
                self._cond.wait(0.05)  # an actor coming up is only seen by polling

    def _actor_lost(self, slot: _Slot, error: BaseException) -> None:
        log.warning(
            "%s: actor lost (%s); replaying its episode elsewhere and replacing it",
            slot.name,
            first_line(error),
        )
        with self._cond:
            self._n["actors_lost"] += 1
            self.lost_at.append(time.monotonic())
            self._n["episodes_replayed"] += 1
            self._n["actors_replaced"] += 1
            old = slot.actor
            if not self._closed:
                self._start_actor(slot)  # scheduled when a node has the resource free
        try:
            self._ray.kill(old)
        except Exception:  # noqa: BLE001 - already gone with its node
            pass


class AppiumSessionFactory:
    """Opens a MobileEnv (one Appium session) on a DeviceSpec, in the actor: picklable, so
    it crosses to the worker. `server_url`: the Appium server, as the node reaches it;
    `mobile_env_kw`: MobileEnv's keywords (image_format, step_timeout_s, screenshot_scale,
    allow_hosts). The chromedriver port is picked free on the node."""

    def __init__(self, server_url: str, **mobile_env_kw):
        self.server_url = server_url
        self.mobile_env_kw = mobile_env_kw

    def __call__(self, spec):
        from .appium_server import free_port
        from .mobile_env import MobileEnv

        return MobileEnv(self.server_url, spec, chromedriver_port=free_port(), **self.mobile_env_kw)


class DesktopEnvFactory:
    """Opens a DesktopEnv on `environment` (a platform: desktop file) in the actor: its own
    Xvfb, accessibility bus and app on the actor's node; picklable. Its actors take one
    unit of `desktop` (`ray start --resources '{"desktop": 8}'` on a node with Xvfb and
    the app installed: scripts/setup_desktop.sh). `desktop_env_kw`: DesktopEnv's keywords
    (image_format, step_timeout_s, wait_timeout_s)."""

    resource = "desktop"
    platform = "desktop"

    def __init__(self, environment, **desktop_env_kw):
        if environment.platform != "desktop":
            raise ValueError(f"environment '{environment.name}' is {environment.platform}, not desktop")
        self.environment = environment
        self.desktop_env_kw = desktop_env_kw

    def __call__(self):
        from .desktop_env import DesktopEnv

        return DesktopEnv(self.environment, **self.desktop_env_kw)


class _WebEnvFactory:
    """Launches a WebEnv in the actor (a picklable callable: it crosses to the worker)."""

    def __init__(self, launch_kw: dict):
        self.launch_kw = launch_kw

    def __call__(self):
        from .web_env import WebEnv

        return WebEnv.launch(**self.launch_kw)
