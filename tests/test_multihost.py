"""Multi-host: three hosts as Linux namespaces, one Redis, two device hosts (issue 27, item 6).

The test makes the hosts itself (tests/support/netns.py): each its own network, mount, UTS
and PID namespaces, plugged by a veth pair into a bridge in a switch namespace, on the
subnet 10.213.7.0/24, which exists only inside these namespaces.  Host A (``hosta``) runs
one redis-server bound to its address; hosts B and C (``hostb``, ``hostc``) each run a CPU
worker and a device worker (CPU backend) with their own ``CUZK_HOSTNAME`` and reach Redis
only over the subnet.  Each has a private spool: the spool path is the same on both, with
the host's own directory mounted there in its mount namespace, so no witness can cross
hosts -- jobs complete only because a partition's stages stay on its device's host
(host-affine stages, issue 27 item 1; on a cluster-wide placement they fail "no such
file").  This test process stays outside: it submits and checks through Redis's unix
socket.

Scenarios (each checks every job done, every proof valid, one completion and one
``partition_done`` per partition; tests/support/outcomes.py):

* ``test_jobs_spread_over_both_device_hosts``: partitions proved on both hosts;
* ``test_kill9_of_a_whole_host``: every process of host B killed at once (its PID
  namespace's pid 1) while it proves: its partitions move to C within 2 x heartbeat TTL
  plus one sweep interval of the kill (measured on Redis's clock, from the kill to the first
  ``redispatch`` event), all jobs done; B is started again afterwards;
* ``test_network_partition_of_a_host``: B's cable out for 30 s mid-prove, then back: nothing
  lost or duplicated, and B takes work again once its heartbeat is back.

Skips with the reason where namespaces cannot be made (not root, no unshare/nsenter/ip,
no veth or bridge in the kernel).  Part of the chaos suite (``-m chaos``); this file alone:
``python -m pytest -q tests/test_multihost.py`` (70-100 s).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import time

import pytest

from support import instruments, netns
from support.outcomes import check_outcome, completed, run_through
from support.processes import Cluster, SnapshotPoller, write_circuits_toml

pytestmark = [pytest.mark.slow, pytest.mark.chaos]

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
REDIS_HOST, DEVICE_HOSTS = "hosta", ("hostb", "hostc")
HB_INTERVAL, HB_TTL = 0.5, 3.0
PROVE_DELAY_S = 0.4
PARTITION_S = 30.0
#: each device host's workers: (name suffix, worker arguments)
WORKERS = (("cpu", ("--cpu", "--concurrency", "2")),
           ("dev0", ("--device", "0", "--backend", "cpu")))

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)",
                allow_module_level=True)
_why_not = netns.unavailable()
if _why_not:
    pytest.skip(_why_not, allow_module_level=True)


class Hosts:
    """The three hosts, Redis on A, the workers of B and C (``self.cluster``: their
    processes, named ``<host>-cpu`` and ``<host>-dev0``, and a client on Redis's socket)."""

    def __init__(self, base):
        from cuzk_tasks.settings.config import load_settings

        self.base = base
        self.net = netns.Network()
        try:
            a = self.net.add(REDIS_HOST)
            self.redis, sock = netns.start_redis(a, base)
            env = dict(os.environ)
            env.update({
                "CUZK_CONFIG": str(write_circuits_toml(base / "cuzk.toml", {
                    "mulchain": ("test-mul", FIX / "mulchain")})),
                "CUZK_PREFIX": "multihost",
                "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL),
                "CUZK_HEARTBEAT_TTL_S": str(HB_TTL),
                "CUZK_SPOOL_DIR": str(base / "spool"),
                "CUZK_SHARED_SPOOL": "0",  # host-affine stages (the default), said anyway
                "CUZK_THREADS": "1",
                **instruments.env(env.get("PYTHONPATH", "")),  # the TEST INSTRUMENT below
                # TEST INSTRUMENT: partitions stay a while in prove, across the faults
                "CUZK_TEST_PROVE_DELAY_MS": str(int(PROVE_DELAY_S * 1000)),
            })
            (base / "spool").mkdir()
            self.worker_env = {**env, "CUZK_REDIS_URL": f"redis://{a.address}:6379/0"}
            client_env = {**env, "CUZK_REDIS_URL": f"unix://{sock}"}
            self.cluster = Cluster(base, client_env, load_settings(env=client_env), ROOT)
            for name in DEVICE_HOSTS:
                self.start(name)
        except BaseException:
            self.close()
            raise

    def start(self, name, timeout=90):
        """(Re)make host ``name`` and start its workers; returns once both heartbeat."""
        own = self.base / f"spool-{name}"  # its private spool, at the common spool path
        own.mkdir(exist_ok=True)
        host = self.net.add(name, bind=(own, self.base / "spool"))
        sec, usec = self.cluster.store.redis.time()
        since = sec + usec / 1e6
        env = {**self.worker_env, "CUZK_HOSTNAME": name}
        for role, args in WORKERS:
            proc = f"{name}-{role}"
            log, n = self.base / f"{proc}.log", 0
            while (self.base / f"{proc}-old-{n}.log").exists():
                n += 1
            if log.exists():  # a host made again: its old logs kept
                log.rename(self.base / f"{proc}-old-{n}.log")
            self.cluster.start(proc, *args, env=env, wrap=lambda argv: host.wrap(argv, cwd=ROOT))
        deadline = time.monotonic() + timeout
        while True:
            roles = {w.get("role") for w in self.cluster.store.all_workers()
                     if w.get("host") == name and w.get("online")
                     and float(w.get("registered_at") or 0) >= since}
            if {"cpu", "device"} <= roles:
                return host
            for role, _ in WORKERS:
                proc = self.cluster.procs[f"{name}-{role}"]
                assert proc.poll() is None, f"{name}-{role} exited\n{self.cluster.logs()}"
            assert time.monotonic() < deadline, f"{name}'s workers did not come up\n" + \
                self.cluster.logs()
            time.sleep(0.1)

    def kill(self, name):
        """kill -9 of every process of host ``name``; returns their names."""
        self.net.hosts[name].kill()
        names = [f"{name}-{role}" for role, _ in WORKERS]
        for proc in names:
            self.cluster.procs[proc].wait(10)
        return names

    def close(self):
        self.net.close()  # every host's pid 1 killed: every process in them ends at once
        if hasattr(self, "cluster"):
            self.cluster.stop_all()  # reaps them


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    h = Hosts(tmp_path_factory.mktemp("multihost"))
    try:
        yield h
    finally:
        h.close()


def _host(worker_id):
    return (worker_id or "").split(":", 1)[0]


def _routed_to(c, jobs, host, state="proving"):
    """Partitions of ``jobs`` in ``state`` on a device of ``host``."""
    return [p for j in jobs for p in c.store.list_partitions(j)
            if p["state"] == state and _host(p.get("worker")) == host]


def test_jobs_spread_over_both_device_hosts(hosts):
    """Jobs submitted on A's Redis run on the devices of both B and C, and complete, with
    spools that are private indeed (a file one host writes there, the other does not see)."""
    spool = hosts.base / "spool"
    b, c = (hosts.net.hosts[name] for name in DEVICE_HOSTS)
    b.run("touch", spool / "written-on-b")
    assert "written-on-b" not in c.run("ls", "-a", spool)
    b.run("rm", spool / "written-on-b")
    _, parts = run_through(hosts.cluster, lambda _: None, ready=lambda c, jobs: jobs,
                           n_jobs=3, n_parts=4)
    by_host = {}
    for p in parts:
        by_host[_host(p["worker"])] = by_host.get(_host(p["worker"]), 0) + 1
    print(f"partitions proved per host: {by_host}")
    assert set(by_host) == set(DEVICE_HOSTS), by_host
    assert [p["state"] for p in parts] == ["done"] * len(parts)


def test_kill9_of_a_whole_host(hosts):
    """kill -9 of host B (every process in it) while its device proves: its partitions are
    re-dispatched to C within 2 x heartbeat TTL plus one sweep interval of the kill (the
    heartbeat key outlives the kill by up to one TTL, C's sweeper notices within one
    interval), and every job completes there, one proof per partition."""
    c, victim = hosts.cluster, DEVICE_HOSTS[0]
    at_kill = {}

    def kill(_):
        sec, usec = c.store.redis.time()
        at_kill["ms"] = sec * 1000 + usec // 1000
        return hosts.kill(victim)

    try:
        took, parts = run_through(c, kill, ready=lambda c, jobs: _routed_to(c, jobs, victim),
                                  n_jobs=3, n_parts=4)
        moved = [int(event_id.split("-")[0]) - at_kill["ms"]
                 for event_id, f in c.store.redis.xrange(c.store.keys.events(),
                                                         min=str(at_kill["ms"]))
                 if f.get("type") == "redispatch" and _host(f.get("from_worker")) == victim]
    finally:
        if at_kill:
            hosts.start(victim)
    assert moved, "nothing was re-dispatched from the killed host"
    detected_s = min(moved) / 1000
    bound_s = 2 * HB_TTL + HB_INTERVAL
    print(f"host {victim} kill -9: first partition moved {detected_s:.2f} s after the kill "
          f"(bound {bound_s:.1f} s), {len(moved)} re-dispatched, all jobs done {took:.1f} s "
          "after the kill")
    assert detected_s <= bound_s, c.logs()
    assert {_host(p["worker"]) for p in parts if int(p.get("redispatches") or 0)} <= \
        {DEVICE_HOSTS[1]}
    assert took < bound_s + len(parts) * PROVE_DELAY_S + 30, c.logs()


def test_network_partition_of_a_host(hosts):
    """Host B's cable out for 30 s while its device proves, then back in: every job
    completes with one proof per partition (B's late writes are stale, its work re-dispatched
    to C), and once its heartbeat is back B proves partitions again."""
    c, victim = hosts.cluster, DEVICE_HOSTS[0]
    host = hosts.net.hosts[victim]

    def cut(_):
        hosts.net.partition(host)
        try:
            time.sleep(PARTITION_S)
        finally:
            hosts.net.heal(host)

    took, _ = run_through(c, cut, ready=lambda c, jobs: _routed_to(c, jobs, victim),
                          n_jobs=3, n_parts=4)
    print(f"host {victim} partitioned {PARTITION_S:.0f} s: all jobs done {took:.1f} s after it "
          "healed")
    # back: its workers heartbeat again, and new jobs reach its device
    deadline = time.monotonic() + 60
    while not {w.get("role") for w in c.store.all_workers()
               if w.get("host") == victim and w.get("online")} >= {"cpu", "device"}:
        assert time.monotonic() < deadline, f"{victim} did not come back\n{c.logs()}"
        time.sleep(0.2)
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    before = completed(c.store)
    poller = SnapshotPoller(c.store)
    poller.start()
    try:
        jobs = [c.client.submit("mulchain", [{"input": inputs}] * 4) for _ in range(2)]
        results = {j: c.client.wait(j, timeout=90) for j in jobs}
    finally:
        poller.stop.set()
        poller.join(5)
    check_outcome(c, results, 4, before, poller)
    hosts_used = {_host(p["worker"]) for j in jobs for p in c.store.list_partitions(j)}
    assert hosts_used == set(DEVICE_HOSTS), hosts_used
