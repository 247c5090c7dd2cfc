"""TEST ONLY: emulated hosts as Linux namespaces, for the multi-host test (issue 27).

A :class:`Network` is one "switch" namespace holding a bridge, and hosts: each a process
tree in its own network, mount, UTS and PID namespaces (``unshare``), wired to the bridge
by a veth pair and given one address of a private subnet (``10.213.7.0/24``) that exists
only inside these namespaces -- nothing is added to the machine's own network.  A host's
pid 1 (:data:`INIT`) sets its host name, bind-mounts the host's private directory over a
shared path if asked (the same spool path, other contents on each host), then reaps
orphans until it is killed or the test process ends (its stdin closes: no host outlives a
killed test).  Killing it (SIGKILL) kills every process of the host at once:
:meth:`Host.kill` is a host's power cut.  :meth:`Network.partition` takes a host's cable
out (the switch-side end of its veth down: its packets vanish, its sockets stay open)
and :meth:`Network.heal` puts it back.

Processes are started in a host with :meth:`Host.wrap` (an ``nsenter`` prefix to an
argv).  The test process itself stays in the machine's namespaces: it reaches a Redis
inside a host through a unix socket on the shared filesystem, not through the subnet.

Needs root, ``unshare``, ``nsenter`` and ``ip`` (util-linux, iproute2) and veth and bridge
support in the kernel: :func:`unavailable` says why not where something is missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

from support.processes import child_pids

SUBNET = "10.213.7"
PREFIX_LEN = 24

#: a host's pid 1: argv host name, then optionally "<private dir> <shared path>" to bind
INIT = r"""
import os, socket, subprocess, sys, threading, time
# the test's end of stdin closes when it exits, even killed: the host goes with it
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
socket.sethostname(sys.argv[1])
if len(sys.argv) > 3:
    subprocess.run(["mount", "--bind", sys.argv[2], sys.argv[3]], check=True)
print("ready", flush=True)
while True:  # pid 1 of the host: reap the orphans of its processes until killed
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
"""

UNSHARE = ["unshare", "--net", "--mount", "--uts", "--pid", "--fork", "--mount-proc"]


def unavailable() -> str | None:
    """Why namespaces with veth pairs and a bridge cannot be made here, or None."""
    if os.geteuid() != 0:
        return "multi-host test needs root (it creates network, mount, UTS and PID namespaces)"
    missing = [t for t in ("unshare", "nsenter", "ip") if shutil.which(t) is None]
    if missing:
        return (f"multi-host test needs {', '.join(missing)} "
                "(apt-get install util-linux iproute2)")
    try:
        probe = subprocess.run(
            [*UNSHARE, "sh", "-c", "ip link add v0 type veth peer name v1 && "
                                   "ip link add br0 type bridge && ip link set lo up"],
            capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"multi-host test: cannot run unshare here ({type(exc).__name__}: {exc})"
    if probe.returncode != 0:
        return ("multi-host test: cannot create namespaces with a veth pair and a bridge "
                f"here (exit {probe.returncode}: {probe.stderr.strip()[:200]})")
    return None


class Host:
    """One emulated host: its namespaces, held by its pid 1 (``self.pid``, as the machine
    sees it).  ``address`` is its address on the subnet (None for the switch)."""

    def __init__(self, name, address=None, bind=None, timeout=20.0):
        self.name, self.address = name, address
        argv = [*UNSHARE, sys.executable, "-c", INIT, name]
        if bind is not None:
            argv += [str(bind[0]), str(bind[1])]
        self.unshare = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        line = self.unshare.stdout.readline()  # blocks until "ready" or the init's exit
        if line.strip() != "ready":
            err = self.unshare.stderr.read() if self.unshare.poll() is not None else ""
            self.unshare.kill()
            raise RuntimeError(f"host {name}: its namespaces did not come up "
                               f"({err.strip()[:300]})")
        deadline = time.monotonic() + timeout
        while not (kids := child_pids(self.unshare.pid)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"host {name}: no pid 1 under unshare {self.unshare.pid}")
            time.sleep(0.01)
        self.pid = kids[0]

    def wrap(self, argv, cwd=None):
        """``argv`` run inside this host (its network, mount, UTS and PID namespaces)."""
        prefix = ["nsenter", "-t", str(self.pid), "--net", "--mount", "--uts", "--pid"]
        if cwd is not None:
            prefix.append(f"--wd={cwd}")
        return [*prefix, "--", *[str(a) for a in argv]]

    def run(self, *argv, net_only=False):
        """Run a short command inside this host; raises with its stderr when it fails.
        ``net_only``: in its network namespace only (``ip`` naming another host by its pid,
        which the machine's PID namespace knows)."""
        argv = [str(a) for a in argv]
        wrapped = (["nsenter", "-t", str(self.pid), "--net", "--", *argv] if net_only
                   else self.wrap(argv))
        done = subprocess.run(wrapped, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"host {self.name}: {' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    @property
    def alive(self):
        return self.unshare.poll() is None

    def kill(self):
        """kill -9 of the whole host: its pid 1 dies, and with it every process in its PID
        namespace; its network namespace goes with the last of them."""
        if self.alive:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.unshare.wait(10)
        for stream in (self.unshare.stdin, self.unshare.stdout, self.unshare.stderr):
            stream.close()


class Network:
    """A switch namespace with bridge ``br0`` and the hosts plugged into it
    (:meth:`add`)."""

    def __init__(self):
        self.switch = Host("switch")
        self.switch.run("ip", "link", "add", "br0", "type", "bridge")
        self.switch.run("ip", "link", "set", "br0", "up")
        self.hosts = {}
        self._next = 1

    def port(self, host):
        """The switch-side end of ``host``'s veth."""
        return f"p-{host.name}"[:15]

    def add(self, name, bind=None, address=None):
        """A new host on the switch (a dead one of that name replaced; its address kept).
        ``bind``: ``(private dir, shared path)`` mounted over each other inside it."""
        old = self.hosts.get(name)
        if address is None:
            address = old.address if old is not None else f"{SUBNET}.{self._next}"
            self._next += old is None
        host = Host(name, address, bind)
        port = self.port(host)
        if old is not None:  # its old port went with the old host's namespace; not always at once
            deadline = time.monotonic() + 10
            while subprocess.run(self.switch.wrap(["ip", "link", "show", port]),
                                 capture_output=True).returncode == 0:
                assert time.monotonic() < deadline, f"the switch still has {port}"
                time.sleep(0.05)
        self.switch.run("ip", "link", "add", port, "type", "veth", "peer", "name", "eth0",
                        "netns", str(host.pid), net_only=True)
        self.switch.run("ip", "link", "set", port, "master", "br0", "up")
        host.run("ip", "addr", "add", f"{address}/{PREFIX_LEN}", "dev", "eth0")
        host.run("ip", "link", "set", "eth0", "up")
        host.run("ip", "link", "set", "lo", "up")
        self.hosts[name] = host
        return host

    def partition(self, host):
        """Cut ``host`` off the network: its cable out (packets dropped, sockets kept)."""
        self.switch.run("ip", "link", "set", self.port(host), "down")

    def heal(self, host):
        self.switch.run("ip", "link", "set", self.port(host), "up")

    def close(self):
        for host in [*self.hosts.values(), self.switch]:
            host.kill()


def start_redis(host, directory, port=6379):
    """redis-server inside ``host``, listening on ``host.address:port`` (the workers' way
    in) and on the unix socket ``directory/redis.sock`` (the test's, from outside the
    subnet); persistence off.  Returns ``(process, socket path)`` once it answers PING."""
    import redis

    sock = os.path.join(str(directory), "redis.sock")
    argv = ["redis-server", "--bind", host.address, "--port", str(port), "--unixsocket", sock,
            "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
            "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning",
            "--logfile", "", "--dir", str(directory)]
    log = open(os.path.join(str(directory), "redis.log"), "wb")
    proc = subprocess.Popen(host.wrap(argv), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log.close()
    deadline = time.monotonic() + 20
    while True:
        try:
            if redis.Redis(unix_socket_path=sock, socket_timeout=1).ping():
                return proc, sock
        except (redis.exceptions.ConnectionError, FileNotFoundError, OSError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis-server in host {host.name} did not start")
        time.sleep(0.05)
