"""Static checks of the deployment files: docker-compose*.yml, Dockerfile, ops/.

There is no Docker engine on CI, so these tests stand in for ``docker compose config``
and ``docker build``: the compose files are validated against the compose-spec JSON
schema (vendored by the ``check-jsonschema`` package) and then checked against the code
-- every service command parses with our CLI, every CUZK_* variable is one the code
reads, every port/volume/path a service relies on exists.  Prometheus files are checked
with ``promtool`` and the systemd units with ``systemd-analyze verify`` when those tools
are installed (they skip with the reason otherwise).  tests/test_ops_smoke.py runs the
same commands as real processes.
"""

from __future__ import annotations

import ast
import copy
import fnmatch
import importlib.resources
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read compose files (pip install pyyaml)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
COMPOSE_GPU = ROOT / "docker-compose.gpu.yml"
OPS = ROOT / "ops"
DOCKERFILE = ROOT / "Dockerfile"
ENTRYPOINT = "cuzk-tasks"          # ENTRYPOINT of both images (checked below)
OUR_IMAGE_PREFIX = "${CUZK_IMAGE:-cuzk-tasks}:"

# ---------------------------------------------------------------------------------------
# helpers shared with tests/test_ops_smoke.py
# ---------------------------------------------------------------------------------------

_VAR = re.compile(r"\$(?:(\$)|\{(\w+)(?:(:?[-?])([^}]*))?\}|(\w+))")


def interpolate(value, env=None):
    """Compose variable interpolation (``${V}``, ``${V:-d}``, ``${V-d}``, ``${V:?e}``, ``$$``)."""
    env = {} if env is None else env
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m):
        if m.group(1):
            return "$"
        name = m.group(2) or m.group(5)
        op, arg = m.group(3), m.group(4)
        val = env.get(name)
        if op == ":-":
            return val if val else arg
        if op == "-":
            return arg if val is None else val
        if op in (":?", "?"):
            if not val:
                raise KeyError(f"required variable {name} is unset: {arg}")
            return val
        return val or ""

    return _VAR.sub(sub, value)


def load_compose(path=COMPOSE):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _merge(base, over):
    """Compose's merge of an override file (mappings merge, lists/scalars replace)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merged_compose(*paths, env=None):
    """The files merged in order and interpolated with ``env`` (defaults when empty)."""
    doc = {}
    for path in paths:
        doc = _merge(doc, load_compose(path))
    return interpolate(doc, env or {})


def service_env(service) -> dict:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def is_ours(service) -> bool:
    return str(service.get("image", "")).startswith(("cuzk-tasks:",)) or "build" in service


def mounts(service):
    """(source, target, read_only) of a service's short-syntax volumes."""
    out = []
    for item in service.get("volumes") or []:
        parts = item.split(":")
        out.append((parts[0], parts[1], len(parts) > 2 and "ro" in parts[2].split(",")))
    return out


#: what a GPU host's .env must set: docker-compose.gpu.yml has no default host name
GPU_HOST_ENV = {"CUZK_HOSTNAME": "gpu-a"}


def compose_services(env=None):
    """Every service of docker-compose.yml + docker-compose.gpu.yml, interpolated."""
    return merged_compose(COMPOSE, COMPOSE_GPU, env=dict(GPU_HOST_ENV, **(env or {})))["services"]


# ---------------------------------------------------------------------------------------
# schema
# ---------------------------------------------------------------------------------------

def _compose_schema():
    pytest.importorskip("jsonschema")
    try:
        res = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    except ModuleNotFoundError:
        pytest.skip("check-jsonschema is not installed (pip install check-jsonschema): it "
                    "vendors the compose-spec JSON schema")
    return json.loads(res.joinpath("compose-spec.json").read_text(encoding="utf-8"))


def _validator():
    import jsonschema

    schema = _compose_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.mark.parametrize("path", [COMPOSE, COMPOSE_GPU], ids=lambda p: p.name)
def test_compose_file_matches_compose_spec_schema(path):
    validator = _validator()
    doc = load_compose(path)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_schema_check_rejects_broken_compose_files():
    """The schema check has teeth: typos and wrong shapes fail it."""
    validator = _validator()
    good = load_compose(COMPOSE)
    typo = copy.deepcopy(good)
    typo["services"]["redis"]["helthcheck"] = typo["services"]["redis"].pop("healthcheck")
    wrong = copy.deepcopy(good)
    wrong["services"]["worker-cpu"]["depends_on"] = {"redis": {"condition": "when_ready"}}
    devices = copy.deepcopy(load_compose(COMPOSE_GPU))
    devices["services"]["worker-gpu0"]["deploy"]["resources"]["reservations"]["devices"][0][
        "device_ids"] = 0
    for doc in (typo, wrong, devices):
        assert list(validator.iter_errors(doc)), "schema accepted a broken compose file"


# ---------------------------------------------------------------------------------------
# services against the code
# ---------------------------------------------------------------------------------------

def _parser():
    from cuzk_tasks.cli import build_parser

    return build_parser()


def test_every_service_of_ours_runs_a_real_cli_command():
    parser = _parser()
    checked = set()
    for name, svc in compose_services().items():
        if not is_ours(svc) or "entrypoint" in svc:
            continue
        command = svc.get("command")
        assert isinstance(command, list) and command, f"{name}: command must be an exec-form list"
        try:
            args = parser.parse_args(command)
        except SystemExit:
            pytest.fail(f"{name}: `{ENTRYPOINT} {' '.join(command)}` is not a valid command")
        assert args.command in {"worker", "web", "submit"}, f"{name}: unexpected {args.command}"
        checked.add(args.command)
    assert checked == {"worker", "web", "submit"}


def test_service_subcommands_answer_help():
    """The real entry point (python -m cuzk_tasks CMD --help) knows every command used."""
    commands = {svc["command"][0] for svc in compose_services().values()
                if is_ours(svc) and "entrypoint" not in svc}
    for cmd in sorted(commands):
        proc = subprocess.run([sys.executable, "-m", "cuzk_tasks", cmd, "--help"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"cuzk-tasks {cmd} --help: {proc.stderr}"


def test_worker_roles_and_devices():
    services = compose_services()
    parser = _parser()

    def args(name):
        return parser.parse_args(services[name]["command"])

    assert args("worker-cpu").cpu
    prover = args("worker-prover-cpu")
    assert prover.device == 0 and prover.backend == "cpu"
    for n in (0, 1):
        gpu = args(f"worker-gpu{n}")
        assert gpu.device == n and gpu.backend == "gpu"
        assert services[f"worker-gpu{n}"]["profiles"] == ["gpu"]
    # scalable: no fixed container_name / host port on the workers
    for name in ("worker-cpu", "worker-prover-cpu"):
        assert "container_name" not in services[name] and "ports" not in services[name]
    # GPU mode turns the CPU-backend provers off
    assert services["worker-prover-cpu"]["deploy"]["replicas"] == 0
    assert "deploy" not in merged_compose(COMPOSE)["services"]["worker-prover-cpu"]


def _string_constants(paths):
    names = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return names


def env_vars_read_by_code() -> set[str]:
    """Environment variable names the code reads: string constants of cuzk_tasks/ (the
    web app included) that look like one (os.environ["X"], env_str("X"), the _FIELDS table ...)."""
    files = list((ROOT / "cuzk_tasks").rglob("*.py"))
    return {s for s in _string_constants(files) if re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", s)}


def test_every_env_var_of_our_services_is_read_by_the_code():
    from cuzk_tasks.settings import config

    known = env_vars_read_by_code()
    settings_vars = {env for _, env, _, _ in config._FIELDS}
    assert settings_vars <= known  # the scan sees the config table
    for name, svc in compose_services().items():
        if not is_ours(svc):
            continue
        for var in service_env(svc):
            assert not var.startswith(("CUZK_TEST_", "CUZK_BENCH_")), \
                f"{name}: test/bench instrument {var} must never be set in a deployment"
            assert var in known, f"{name}: {var} is not read anywhere in cuzk_tasks/"


def test_service_settings_load(tmp_path):
    """The environment of each service of ours is accepted by load_settings / the web config."""
    from cuzk_tasks.settings.config import load_settings

    config = _sample_config(tmp_path)
    for name, svc in compose_services({"REDIS_PASSWORD": "pw"}).items():
        if not is_ours(svc) or not service_env(svc):
            continue
        env = dict(service_env(svc), CUZK_CONFIG=str(config))
        settings = load_settings(env=env)
        assert settings.redis_url == "redis://:pw@redis:6379/0", name
        assert "mulchain_1k" in settings.circuits
        if svc["command"][0] == "web":
            from cuzk_tasks.web.config import load_web_config

            web = load_web_config(env=env)
            assert web.bind == "0.0.0.0:8080"


def _sample_config(tmp_path):
    """ops/compose/cuzk.toml beside the bundled circuit, as circuits-init lays them out."""
    shutil.copytree(ROOT / "cuzk_tasks" / "data" / "mulchain_1k", tmp_path / "mulchain_1k")
    shutil.copy(OPS / "compose" / "cuzk.toml", tmp_path / "cuzk.toml")
    return tmp_path / "cuzk.toml"


def test_other_services_env_is_used():
    """Non-cuzk services: each variable is used by the command/healthcheck, or is Grafana's."""
    for name, svc in load_compose()["services"].items():
        if is_ours(svc):
            continue
        used = json.dumps([svc.get("command"), svc.get("healthcheck"), svc.get("entrypoint")])
        for var in service_env(svc):
            if name == "grafana":
                assert var.startswith("GF_"), var
            else:
                assert f"$${var}" in used or f"${{{var}" in used, f"{name}: {var} is never used"


def test_paths_in_env_live_on_mounted_volumes():
    for name, svc in compose_services().items():
        env = service_env(svc)
        targets = [t for _, t, _ in mounts(svc)]
        for var in ("CUZK_CONFIG", "CUZK_SPOOL_DIR", "CUZK_RESULTS_DIR"):
            if var not in env:
                continue
            path = env[var]
            assert any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets), \
                f"{name}: {var}={path} is not on a volume ({targets})"
        # spool and results are shared by every worker: same named volume everywhere
        for source, target, ro in mounts(svc):
            if target in ("/srv/spool", "/srv/results"):
                assert source in ("spool", "results") and not ro, (name, source, target)


def test_volumes_and_bind_mounts_exist():
    doc = merged_compose(COMPOSE, COMPOSE_GPU, env=GPU_HOST_ENV)
    declared = set(doc.get("volumes") or {})
    used = set()
    for name, svc in doc["services"].items():
        for source, target, _ in mounts(svc):
            assert target.startswith("/"), f"{name}: {target}"
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name}: bind mount source {source} is missing"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert declared == used, f"declared but unused volumes: {declared - used}"
    # the circuits volume can be swapped for a host directory
    alt = merged_compose(COMPOSE, env={"CUZK_CIRCUITS": "./my-circuits"})
    assert ("./my-circuits", "/srv/circuits", True) in mounts(alt["services"]["worker-cpu"])


def test_circuits_init_seeds_what_the_config_needs():
    """circuits-init copies /opt/cuzk/circuits (Dockerfile COPYs the sample there) into the
    volume that holds CUZK_CONFIG; and the sample config registers the submitted circuit."""
    services = compose_services()
    init = services["circuits-init"]
    assert init["entrypoint"] == ["python", "/usr/local/bin/cuzk-circuits-init",
                                  "/opt/cuzk/circuits", "/srv/circuits"]
    assert init["restart"] == "no"
    copies = _dockerfile_copies()
    for stage in ("cpu", "gpu"):
        dests = {dest for _, dest in copies[stage]}
        assert "/opt/cuzk/circuits/mulchain_1k" in dests and "/opt/cuzk/circuits/cuzk.toml" in dests
        assert ("ops/compose/circuits-init.py", "/usr/local/bin/cuzk-circuits-init") \
            in copies[stage]
    submit = services["demo-submit"]["command"]
    assert submit[1] == "mulchain_1k"
    for ref in submit[2:]:
        if ref.startswith("/srv/circuits/"):
            assert (ROOT / "cuzk_tasks" / "data" / ref.removeprefix("/srv/circuits/")).exists()


def test_depends_on_conditions_are_sound():
    services = compose_services()
    for name, svc in services.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            cond = spec.get("condition", "service_started")
            if cond == "service_healthy":
                assert "healthcheck" in services[dep], f"{name}: {dep} has no healthcheck"
            if cond == "service_completed_successfully":
                assert services[dep].get("restart") == "no", f"{dep} is not a one-shot"
    for name in ("redis", "web", "worker-cpu", "worker-prover-cpu", "worker-gpu0"):
        assert "healthcheck" in services[name], name


def test_ports_match_what_services_listen_on():
    services = compose_services()
    web = services["web"]
    bind_port = service_env(web)["CUZK_WEB_BIND"].rsplit(":", 1)[1]
    assert [p.rsplit(":", 1)[1] for p in web["ports"]] == [bind_port]
    assert service_env(web)["CUZK_WEB_BIND"].startswith("0.0.0.0:")  # reachable from outside
    # Redis is not published; the URL names the service and the port of redis.conf
    assert "ports" not in services["redis"]
    from urllib.parse import urlsplit

    url = urlsplit(service_env(services["worker-cpu"])["CUZK_REDIS_URL"])
    conf = _redis_conf()
    assert url.hostname == "redis" and str(url.port) == conf["port"]
    # Prometheus scrapes the web service on its bind port
    prom = yaml.safe_load((OPS / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in prom["scrape_configs"] if job["job_name"] == "cuzk-web"
               for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == [f"web:{bind_port}"]
    assert services["prometheus"]["ports"] == ["127.0.0.1:9090:9090"]
    assert services["grafana"]["ports"] == ["127.0.0.1:3000:3000"]
    ds = yaml.safe_load((OPS / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"


def test_nothing_is_published_beyond_loopback_by_default():
    """Issue 24: the page (it serves proofs), Prometheus (no authentication) and Grafana are
    published on the host's 127.0.0.1 unless the operator names another address."""
    for name, svc in compose_services().items():
        for port in svc.get("ports") or []:
            assert port.startswith("127.0.0.1:"), (name, port)
    out = compose_services({"CUZK_WEB_PUBLISH": "0.0.0.0", "PROMETHEUS_PUBLISH": "10.0.0.5",
                            "GRAFANA_PUBLISH": "0.0.0.0", "CUZK_WEB_PORT": "8443"})
    assert out["web"]["ports"] == ["0.0.0.0:8443:8080"]
    assert out["prometheus"]["ports"] == ["10.0.0.5:9090:9090"]
    assert out["grafana"]["ports"] == ["0.0.0.0:3000:3000"]
    # the web container knows what it is published on (cuzk_tasks.web.serve.check_exposure)
    assert service_env(out["web"])["CUZK_WEB_PUBLISH"] == "0.0.0.0"
    assert service_env(compose_services()["web"])["CUZK_WEB_PUBLISH"] == "127.0.0.1"


def _web_config(tmp_path, env):
    from cuzk_tasks.web.config import load_web_config

    svc = compose_services(dict(env, REDIS_PASSWORD="pw"))["web"]
    return load_web_config(env=dict(service_env(svc), CUZK_CONFIG=str(_sample_config(tmp_path))))


def test_web_refuses_to_be_published_without_a_token(tmp_path):
    from cuzk_tasks.errors import ConfigError
    from cuzk_tasks.web.serve import check_exposure

    check_exposure(_web_config(tmp_path / "a", {}))  # loopback: no token needed
    with pytest.raises(ConfigError, match="CUZK_WEB_TOKEN"):
        check_exposure(_web_config(tmp_path / "b", {"CUZK_WEB_PUBLISH": "0.0.0.0"}))
    check_exposure(_web_config(tmp_path / "c", {"CUZK_WEB_PUBLISH": "0.0.0.0",
                                                "CUZK_WEB_TOKEN": "t0ken"}))
    # without compose (systemd) the bind address is what other hosts reach
    from cuzk_tasks.web.config import WebConfig

    for bind in ("0.0.0.0:8080", "[::]:8080", "10.1.2.3:80"):
        with pytest.raises(ConfigError, match="CUZK_WEB_BIND"):
            check_exposure(WebConfig(bind=bind))
        check_exposure(WebConfig(bind=bind, token="t"))
    for bind in ("127.0.0.1:8080", "[::1]:8080", "localhost:8080", "unix:/run/cuzk/web.sock"):
        check_exposure(WebConfig(bind=bind))
    # the real command, as the container runs it: it exits with the message, before gunicorn
    env = dict(os.environ, CUZK_WEB_PUBLISH="0.0.0.0", CUZK_WEB_TOKEN="", CUZK_WEB_BIND="127.0.0.1:1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-m", "cuzk_tasks", "web"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "CUZK_WEB_PUBLISH=0.0.0.0" in proc.stderr, proc.stderr
    assert "Starting gunicorn" not in proc.stderr


def test_prometheus_has_no_lifecycle_api():
    """--web.enable-lifecycle lets anyone who reaches the port POST /-/quit or /-/reload."""
    prom = compose_services()["prometheus"]
    assert not any("lifecycle" in arg for arg in prom["command"])


def test_grafana_has_no_default_admin_password(tmp_path):
    """No admin/admin: GRAFANA_ADMIN_PASSWORD, or one the entrypoint generates at the first
    start into the data volume (mode 0600) and reuses later.  The script runs here with sh,
    /run.sh standing for Grafana's start."""
    grafana = compose_services()["grafana"]
    assert service_env(grafana)["GF_SECURITY_ADMIN_PASSWORD"] == ""
    given = compose_services({"GRAFANA_ADMIN_PASSWORD": "s3cret"})["grafana"]
    assert service_env(given)["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret"
    assert service_env(grafana)["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    sh, dash_c, script, name = grafana["entrypoint"]
    assert (sh, dash_c) == ("sh", "-c") and "exec /run.sh" in script
    script = script.replace("/var/lib/grafana", str(tmp_path)).replace(
        "exec /run.sh", "exec sh -c 'echo \"PW=$GF_SECURITY_ADMIN_PASSWORD\"'")

    def start(**env):
        proc = subprocess.run(["sh", "-c", script, name], capture_output=True, text=True,
                              env={**os.environ, "GF_SECURITY_ADMIN_PASSWORD": "", **env}, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip().splitlines()[-1].removeprefix("PW=")

    first = start()
    assert len(first) == 24 and first.isalnum() and first != "admin"
    assert start() == first  # reused, not regenerated
    stored = tmp_path / "cuzk-admin-password"
    assert stored.read_text() == first and (stored.stat().st_mode & 0o777) == 0o600
    assert start(GF_SECURITY_ADMIN_PASSWORD="given") == "given"


def test_profiles():
    services = compose_services()
    default = {n for n, s in services.items() if not s.get("profiles")}
    assert default == {"redis", "circuits-init", "web", "worker-cpu", "worker-prover-cpu",
                       "demo-submit"}
    assert services["prometheus"]["profiles"] == services["grafana"]["profiles"] == ["monitoring"]


# ---------------------------------------------------------------------------------------
# redis and the password
# ---------------------------------------------------------------------------------------

def _redis_conf():
    conf = {}
    for line in (OPS / "redis" / "redis.conf").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            conf[key] = value.strip()
    return conf


def test_redis_is_durable_and_never_evicts():
    conf = _redis_conf()
    assert conf["appendonly"] == "yes"
    assert conf["appendfsync"] in ("everysec", "always")
    assert conf["maxmemory-policy"] == "noeviction"
    assert "requirepass" not in conf  # the password comes from the environment
    redis = load_compose()["services"]["redis"]
    assert ("redis-data", "/data", False) in mounts(redis)
    assert "dir" not in conf  # default "./": the redis image's WORKDIR, /data
    assert ("./ops/redis/redis.conf", "/usr/local/etc/redis/cuzk.conf", True) in mounts(redis)


def test_redis_password_comes_from_env_and_is_not_exposed():
    raw = COMPOSE.read_text() + COMPOSE_GPU.read_text()
    doc = merged_compose(COMPOSE, COMPOSE_GPU, env=dict(GPU_HOST_ENV, REDIS_PASSWORD="SENTINEL-PW"))
    redis = doc["services"]["redis"]
    # not on the redis command line (ps) and not given to redis-cli with -a (warns into logs)
    cmd = " ".join(redis["command"])
    assert "--requirepass" not in cmd and "requirepass" in cmd and "umask 077" in cmd
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])
    assert " -a " not in " ".join(redis["healthcheck"]["test"])
    # every client gets it only inside the URL, from the variable
    for name, svc in doc["services"].items():
        url = service_env(svc).get("CUZK_REDIS_URL")
        if url:
            assert url.startswith("redis://:SENTINEL-PW@"), name
        if is_ours(svc):
            assert not any("SENTINEL-PW" in str(a) for a in svc.get("command") or []), name
    assert raw.count("${REDIS_PASSWORD:-cuzk-change-me}") >= 3


# ---------------------------------------------------------------------------------------
# GPU generator
# ---------------------------------------------------------------------------------------

def _gen(*args):
    proc = subprocess.run([sys.executable, str(OPS / "gen-gpu-compose.py"), *args],
                          capture_output=True, text=True, timeout=60)
    return proc


def test_committed_gpu_file_is_the_generator_output():
    proc = _gen("2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == COMPOSE_GPU.read_text(), \
        "docker-compose.gpu.yml is stale: python3 ops/gen-gpu-compose.py 2 > docker-compose.gpu.yml"


@pytest.mark.parametrize("args, devices", [(["3"], [0, 1, 2]), (["--devices", "0,2,5"], [0, 2, 5])])
def test_generator_pins_one_worker_per_gpu(tmp_path, args, devices):
    proc = _gen(*args)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "docker-compose.gpu.yml"
    path.write_text(proc.stdout)
    validator = _validator()
    assert not list(validator.iter_errors(yaml.safe_load(proc.stdout)))
    base = load_compose()
    services = merged_compose(COMPOSE, path, env=GPU_HOST_ENV)["services"]
    gpu = sorted(n for n in services if n.startswith("worker-gpu"))
    assert gpu == sorted(f"worker-gpu{d}" for d in devices)
    base_env = interpolate(dict(base["x-cuzk-env"], **base["x-cuzk-paths"]))
    prover = services["worker-prover-cpu"]
    for d in devices:
        svc = services[f"worker-gpu{d}"]
        assert svc["command"] == ["worker", "--device", str(d), "--backend", "gpu"]
        assert svc["build"]["target"] == "gpu"
        (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
        assert dev["device_ids"] == [str(d)] and dev["capabilities"] == ["gpu"]
        env = service_env(svc)
        assert env["CUDA_VISIBLE_DEVICES"] == "0"  # its one visible GPU
        assert {k: env[k] for k in base_env} == base_env, "GPU env drifted from x-cuzk-env"
        assert svc["volumes"] == prover["volumes"]
        assert svc["depends_on"] == prover["depends_on"]


def test_gpu_hosts_have_no_shared_default_host_name():
    """Two GPU hosts that forget CUZK_HOSTNAME must not share a name (and so their device
    queues and worker ids): the GPU file requires it, and says how to set it."""
    with pytest.raises(KeyError, match="CUZK_HOSTNAME") as err:
        merged_compose(COMPOSE, COMPOSE_GPU)
    assert "unique" in str(err.value)
    for name, svc in compose_services({"CUZK_HOSTNAME": "rack7"}).items():
        if name.startswith("worker-gpu"):
            assert service_env(svc)["CUZK_HOSTNAME"] == "rack7", name
    assert "gpuhost" not in COMPOSE_GPU.read_text()


def test_generator_rejects_bad_input():
    for args in (["0"], ["--devices", "1,1"], ["--devices", "a"], []):
        assert _gen(*args).returncode != 0, args


# ---------------------------------------------------------------------------------------
# Dockerfile and .dockerignore
# ---------------------------------------------------------------------------------------

def dockerfile_stages():
    """{stage name: [(instruction, args)]} with line continuations joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    args = {}
    stages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "ARG" and current is None:
            key, _, value = rest.partition("=")
            args[key.strip()] = value.strip()
            continue
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            image = re.sub(r"\$\{(\w+)\}", lambda v: args.get(v.group(1), v.group(0)), m.group(1))
            current = m.group(2) or f"stage{len(stages)}"
            stages[current] = [("FROM", image)]
            continue
        stages[current].append((instr, rest.strip()))
    return stages


def _dockerfile_copies():
    out = {}
    for stage, instrs in dockerfile_stages().items():
        out[stage] = []
        for instr, rest in instrs:
            if instr == "COPY" and "--from=" not in rest:
                parts = rest.split()
                dest = parts[-1]
                for src in parts[:-1]:
                    d = dest if not dest.endswith("/") else dest + pathlib.PurePosixPath(src).name
                    out[stage].append((src, d))
    return out


def _glob_regex(pattern: str):
    """Go filepath.Match-style glob (``*`` stays within one path element; ``**`` spans)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignore_excludes(rel: str) -> bool:
    """Docker's .dockerignore semantics, enough for our file: patterns are anchored at the
    context root, the last matching rule wins, and a rule matching a directory matches
    everything below it."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            neg = line.startswith("!")
            rules.append((neg, _glob_regex(line.lstrip("!").strip("/"))))
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for neg, regex in rules:
        if any(regex.match(p) for p in prefixes):
            excluded = not neg
    return excluded


def build_context_files():
    """Repository files that `docker build .` sends (tracked or not, minus .dockerignore)."""
    out = []
    for path in ROOT.rglob("*"):
        if path.is_file():
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith((".git/", ".venv/")):
                continue
            if not dockerignore_excludes(rel):
                out.append(rel)
    return sorted(out)


def test_dockerfile_targets_bases_users_healthchecks():
    stages = dockerfile_stages()
    assert {"build-cpu", "cpu", "build-gpu", "gpu"} <= set(stages)
    assert list(stages)[-1] == "default" and stages["default"][0] == ("FROM", "cpu")
    for name in ("build-cpu", "cpu"):
        assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", stages[name][0][1]), stages[name][0]
    for name in ("build-gpu", "gpu"):
        assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-runtime-ubuntu\d+\.\d+", stages[name][0][1])
    for name in ("cpu", "gpu"):
        instrs = dict(stages[name])  # last of each kind
        assert instrs["USER"] not in ("root", "0"), name
        assert "HEALTHCHECK" in instrs and "cuzk-healthcheck" in instrs["HEALTHCHECK"]
        assert json.loads(instrs["ENTRYPOINT"]) == [ENTRYPOINT]
        assert any(i == "COPY" and r.startswith("--from=build-") for i, r in stages[name])
        # the compiler stays in the build stage
        assert not any(i == "RUN" and "g++" in r for i, r in stages[name]), name
        assert any(i == "RUN" and "g++" in r for i, r in stages[f"build-{name}"])
    gpu_build = " ".join(r for i, r in stages["build-gpu"] if i == "RUN")
    assert "[gpu]" in gpu_build and "constraints-gpu.txt" in gpu_build


def test_dockerfile_copy_sources_are_in_the_build_context():
    context = build_context_files()
    for stage, copies in _dockerfile_copies().items():
        for src, _ in copies:
            src = src.rstrip("/")
            hits = [f for f in context if f == src or f.startswith(src + "/")]
            assert hits, f"{stage}: COPY {src} is missing from the build context (.dockerignore?)"
    # nothing compiled on the host, nothing bulky
    assert not [f for f in context if f.endswith((".so", ".pyc"))]
    assert not [f for f in context if f.startswith(("bench/", "tools/node", "tests/", "build/"))]
    size = sum((ROOT / f).stat().st_size for f in context)
    assert size < 20 * 2**20, f"build context is {size / 2**20:.1f} MiB"


def test_constraints_pin_every_dependency():
    import tomllib

    from packaging.requirements import Requirement

    pins = {}
    for name in ("constraints.txt", "constraints-gpu.txt"):
        for line in (OPS / name).read_text().splitlines():
            line = line.split("#")[0].split(";")[0].strip()  # ";": an environment marker
            if line:
                pkg, _, ver = line.partition("==")
                pkg, ver = pkg.strip(), ver.strip()
                assert ver, f"{name}: {line} is not an exact pin"
                pins[re.sub(r"[-_.]+", "-", pkg).lower()] = ver
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = list(project["dependencies"]) + list(project["optional-dependencies"]["gpu"])
    for req in map(Requirement, needed):
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        assert key in pins, f"{req.name} is not pinned in ops/constraints*.txt"
        assert req.specifier.contains(pins[key], prereleases=True), (req, pins[key])
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for req in map(Requirement, build):
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        assert key in pins and req.specifier.contains(pins[key]), req


# ---------------------------------------------------------------------------------------
# Prometheus, Grafana
# ---------------------------------------------------------------------------------------

def exposed_metric_names() -> set[str]:
    """Sample names /metrics can expose: every metric family cuzk_tasks/web/metrics.py builds, from
    a status document with every group populated and a state store's histograms."""
    fakeredis = pytest.importorskip("fakeredis")
    pytest.importorskip("prometheus_client")
    from cuzk_tasks.state import StateStore
    from cuzk_tasks.web import metrics

    groups = ("completed", "failed", "prove_faults", "jobs_done", "jobs_failed", "jobs_cancelled",
              "requests_rejected")
    status = {"queues": [{"name": "q", "depth": 1}],
              "workers": [{"id": "h:dev0", "role": "device", "host": "h", "state": "idle"}],
              "timeline": {"devices": [{"worker": "h:dev0", "duty_cycle": 0.5}]},
              "jobs": [], "throughput": [{"window_s": 60, "per_min": 1.0}]}
    store = StateStore(fakeredis.FakeRedis(decode_responses=True), prefix="names")
    families = [*metrics.counter_families({g: {"kind": 1} for g in groups}),
                metrics.histogram_family(store), *metrics.gauge_families(status),
                *metrics.eta_families([{"circuit": "c", "eta_s": 1.0, "actual_s": 1.2}])]
    names = set()
    for family in families:
        if family.type == "counter":
            names |= {family.name + "_total", family.name + "_created"}
        elif family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def _exprs_in_rules():
    rules = yaml.safe_load((OPS / "prometheus" / "alerts.yml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def _exprs_in_dashboard():
    dash = json.loads((OPS / "grafana" / "dashboards" / "cuzk.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def metric_names_used(exprs):
    return {m for e in exprs for m in re.findall(r"\b(cuzk_[a-z_]+)\b", e)}


def test_alerts_and_dashboard_use_exposed_metrics():
    exposed = exposed_metric_names()
    assert exposed, "no metric families found in cuzk_tasks/web/metrics.py"
    for where, exprs in (("alerts.yml", _exprs_in_rules()), ("cuzk.json", _exprs_in_dashboard())):
        unknown = metric_names_used(exprs) - exposed
        assert not unknown, f"{where} uses metrics /metrics does not expose: {sorted(unknown)}"
    alerts = {r["alert"] for g in yaml.safe_load((OPS / "prometheus/alerts.yml").read_text())["groups"]
              for r in g["rules"]}
    assert {"CuzkDeviceWorkerOffline", "CuzkQueueGrowing", "CuzkFailureRateHigh",
            "CuzkNoProofCompleted"} <= alerts


def test_grafana_provisioning_matches_compose_mounts():
    grafana = load_compose()["services"]["grafana"]
    targets = {t: s for s, t, _ in mounts(grafana)}
    assert targets["/etc/grafana/provisioning"] == "./ops/grafana/provisioning"
    provider = yaml.safe_load((OPS / "grafana/provisioning/dashboards/cuzk.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert targets[path] == "./ops/grafana/dashboards"
    ds = yaml.safe_load((OPS / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = ds["datasources"][0]["uid"]
    dash = json.loads((OPS / "grafana/dashboards/cuzk.json").read_text())
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == uid, panel["title"]
    home = interpolate(grafana["environment"])["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == path + "/cuzk.json"


def _promtool():
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus): Prometheus rules "
                    "and config are only checked by the static tests above")
    return tool


def _run(argv, cwd=None):
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_promtool_check_rules_and_config():
    tool = _promtool()
    _run([tool, "check", "rules", "alerts.yml"], cwd=OPS / "prometheus")
    _run([tool, "check", "config", "prometheus.yml"], cwd=OPS / "prometheus")


def test_promtool_alert_unit_tests():
    """ops/prometheus/alerts_test.yml: each alert fires on a synthetic series and not on a
    healthy one."""
    _run([_promtool(), "test", "rules", "alerts_test.yml"], cwd=OPS / "prometheus")


def test_dashboard_queries_are_valid_promql(tmp_path):
    tool = _promtool()
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"cuzk_dashboard_expr_{i}", "expr": e}
        for i, e in enumerate(_exprs_in_dashboard())]}]}
    (tmp_path / "dash.yml").write_text(yaml.safe_dump(rules))
    _run([tool, "check", "rules", str(tmp_path / "dash.yml")])


# ---------------------------------------------------------------------------------------
# systemd
# ---------------------------------------------------------------------------------------

UNITS = ["cuzk-worker@.service", "cuzk-worker-cpu.service", "cuzk-web.service"]
UNIT_EXEC = "/opt/cuzk-tasks/venv/bin/cuzk-tasks"


def _unit(name):
    import configparser

    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string((OPS / "systemd" / name).read_text())
    return parser


def test_systemd_units_run_real_commands():
    parser = _parser()
    expected = {"cuzk-worker@.service": ["worker", "--device", "%i", "--backend", "gpu"],
                "cuzk-worker-cpu.service": ["worker", "--cpu"],
                "cuzk-web.service": ["web"]}
    for name, argv in expected.items():
        unit = _unit(name)
        svc = unit["Service"]
        exec_argv = svc["ExecStart"].split()
        assert exec_argv[0] == UNIT_EXEC and exec_argv[1:] == argv, name
        parser.parse_args([a.replace("%i", "3") for a in exec_argv[1:]])
        assert svc["EnvironmentFile"] == "/etc/cuzk/cuzk.env"
        assert svc["Restart"] == "on-failure"
        assert svc["User"] == "cuzk"
        if "worker" in argv:
            assert svc["KillMode"] == "mixed" and svc["KillSignal"] == "SIGTERM"
    known = env_vars_read_by_code()
    for line in (OPS / "systemd" / "cuzk.env.example").read_text().splitlines():
        line = line.lstrip("#").strip()
        if re.match(r"[A-Z_]+=", line):
            assert line.split("=")[0] in known, line


def test_systemd_analyze_verify(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # verify needs ExecStart to exist: point it at a real executable, and the env file at ours
    fake = tmp_path / "bin" / "cuzk-tasks"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    for name in UNITS:
        text = (OPS / "systemd" / name).read_text()
        text = text.replace(UNIT_EXEC, str(fake))
        text = text.replace("/etc/cuzk/cuzk.env", str(OPS / "systemd" / "cuzk.env.example"))
        (tmp_path / name).write_text(text)
    names = [n.replace("@.", "@0.") for n in UNITS]
    proc = subprocess.run([tool, "verify", *[str(tmp_path / n) for n in names]],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, SYSTEMD_LOG_LEVEL="warning"))
    if proc.returncode != 0 and "Failed to initialize" in proc.stderr:  # pragma: no cover
        pytest.skip(f"systemd-analyze cannot run here: {proc.stderr.strip()[:200]}")
    # any complaint (unknown key, bad value, missing binary) is printed to stderr
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


def test_healthcheck_script_parses_worker_ids():
    """ops/healthcheck.py derives the worker id exactly as the worker does."""
    sys.path.insert(0, str(OPS))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("cuzk_healthcheck", OPS / "healthcheck.py")
        hc = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(hc)
    finally:
        sys.path.remove(str(OPS))
    from cuzk_tasks.settings.config import load_settings

    settings = load_settings(env={"CUZK_HOSTNAME": "h1"})
    assert hc.worker_id_for(settings, ["cuzk-tasks", "worker", "--device", "2"], 77) == "h1:dev2"
    assert hc.worker_id_for(settings, ["cuzk-tasks", "worker", "--cpu"], 77) == "h1:cpu:77"
    assert hc._is_worker(["python", "/x/cuzk-tasks", "worker", "--cpu"])
    assert not hc._is_worker(["python", "-m", "gunicorn"])


def test_every_compose_variable_is_documented():
    """Each ${VAR} the compose files interpolate is listed in ops/compose.env.example."""
    text = COMPOSE.read_text() + COMPOSE_GPU.read_text()
    used = {m.group(2) or m.group(5) for m in _VAR.finditer(text) if not m.group(1)}
    # $$-escaped names are the container's own shell variables, not compose's
    escaped = set(re.findall(r"\$\$\{?(\w+)", text))
    documented = set(re.findall(r"^#?([A-Z_]+)=", (OPS / "compose.env.example").read_text(), re.M))
    missing = sorted(used - escaped - documented)
    assert not missing, f"document these in ops/compose.env.example: {missing}"


# ---------------------------------------------------------------------------------------
# compose defects found on a real engine (tests/test_docker_stack.py runs them for real)
# ---------------------------------------------------------------------------------------

def _load_ops_script(name, filename):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_healthcheck_finds_the_worker_under_docker_init():
    """With compose `init: true` PID 1 is docker-init carrying the worker's command line;
    the check must pick the worker's main process (not PID 1, not a pool child)."""
    hc = _load_ops_script("cuzk_healthcheck_init", OPS / "healthcheck.py")
    argv = {1: ["/sbin/docker-init", "--", "cuzk-tasks", "worker", "--cpu"],
            7: ["/opt/venv/bin/python", "/opt/venv/bin/cuzk-tasks", "worker", "--cpu"],
            9: ["/opt/venv/bin/python", "/opt/venv/bin/cuzk-tasks", "worker", "--cpu"],
            12: ["tini", "--", "cuzk-tasks", "worker", "--device", "0"]}
    parent = {1: 0, 7: 1, 9: 7, 12: 0}
    orig = hc._cmdline, hc._ppid
    hc._cmdline, hc._ppid = (lambda pid: argv.get(pid, [])), (lambda pid: parent.get(pid, 0))
    try:
        assert hc.find_worker_main([1, 7, 9]) == (7, argv[7])
        assert hc.find_worker_main([1, 12]) == (None, [])  # inits alone are no worker
    finally:
        hc._cmdline, hc._ppid = orig
    assert not hc._is_worker(argv[1]) and hc._is_worker(argv[7])
    assert hc._is_worker(["/usr/bin/python3", "-m", "cuzk_tasks", "worker", "--device", "0"])


def test_gunicorn_opens_no_control_socket():
    """gunicorn >= 25 opens a control socket under $HOME/.gunicorn, which the image's user
    cannot create (/opt/cuzk is root's): the config turns it off, and gunicorn reads it."""
    pytest.importorskip("gunicorn")
    from gunicorn.config import Config

    path = ROOT / "cuzk_tasks" / "web" / "gunicorn.conf.py"
    namespace = {"__file__": str(path), "__name__": "__config__"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    assert namespace["control_socket_disable"] is True
    cfg = Config()
    if "control_socket_disable" in cfg.settings:  # gunicorn >= 25.1
        cfg.set("control_socket_disable", namespace["control_socket_disable"])
        assert cfg.control_socket_disable is True


def test_env_file_is_neither_committed_nor_in_the_build_context():
    ignored = [l.strip() for l in (ROOT / ".gitignore").read_text().splitlines()]
    assert ".env" in ignored
    assert dockerignore_excludes(".env") and dockerignore_excludes("ops/.env")
    if shutil.which("git") and (ROOT / ".git").exists():
        proc = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT, timeout=30)
        assert proc.returncode == 0, ".env is not git-ignored"


def test_dockerfile_has_no_syntax_directive():
    """`# syntax=` makes BuildKit fetch a frontend image from a registry: offline it fails."""
    for line in DOCKERFILE.read_text().splitlines():
        if not line.startswith("#"):
            break
        assert not re.match(r"#\s*syntax\s*=", line, re.I), line


def test_demo_submission_is_idempotent_and_does_not_break_up_wait():
    services = compose_services()
    args = _parser().parse_args(services["demo-submit"]["command"])
    assert args.request_id, "demo-submit needs a fixed --request-id: every `up` would add a job"
    assert not args.wait, "demo-submit only queues: `web` waits for it to exit"
    # `up --wait` accepts a one-shot's exit only when some service depends on its completion
    for one_shot in ("circuits-init", "demo-submit"):
        adopters = [n for n, s in services.items()
                    if (s.get("depends_on") or {}).get(one_shot, {}).get("condition")
                    == "service_completed_successfully" and s.get("restart") != "no"]
        assert adopters, f"{one_shot}: no long-running service depends on its completion"
    assert services["web"]["depends_on"]["demo-submit"]["required"] is False


def test_base_images_are_overridable():
    """CI builds on local stand-ins: the cpu build gets PYTHON_IMAGE, redis REDIS_IMAGE."""
    doc = merged_compose(COMPOSE, env={"REDIS_IMAGE": "local/redis:x"})
    assert doc["services"]["redis"]["image"] == "local/redis:x"
    assert merged_compose(COMPOSE)["services"]["redis"]["image"] == "redis:7.2.5-bookworm"
    stages = dockerfile_stages()
    assert stages["cpu"][0] == ("FROM", "python:3.11.11-slim-bookworm")  # the ARG default
    assert "ARG PYTHON_IMAGE" in DOCKERFILE.read_text()
    for name in ("web", "worker-cpu", "worker-prover-cpu"):
        assert "PYTHON_IMAGE" in doc["services"][name]["build"]["args"], name


def test_prover_replicas_take_host_slots():
    services = compose_services()
    env = service_env(services["worker-prover-cpu"])
    assert env["CUZK_HOST_SLOT"] == "prover-cpu"
    assert "CUZK_HOST_SLOT" not in service_env(services["worker-cpu"])


def _circuits_init():
    return _load_ops_script("cuzk_circuits_init", OPS / "compose" / "circuits-init.py")


def _image_circuits(tmp_path):
    src = tmp_path / "image"
    shutil.copytree(ROOT / "cuzk_tasks" / "data" / "mulchain_1k", src / "mulchain_1k")
    shutil.copy(OPS / "compose" / "cuzk.toml", src / "cuzk.toml")
    return src


def test_circuits_init_fresh_volume_gets_the_sample(tmp_path):
    from cuzk_tasks.settings.config import load_settings

    init = _circuits_init()
    src, dest = _image_circuits(tmp_path), tmp_path / "vol"
    dest.mkdir()
    assert init.main([str(src), str(dest)]) == 0
    assert (dest / "cuzk.toml").read_text() == (src / "cuzk.toml").read_text()
    settings = load_settings(path=dest / "cuzk.toml", env={})
    assert "mulchain_1k" in settings.circuits
    # a second run copies nothing and changes nothing
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert init.main([str(src), str(dest)]) == 0
    assert before == {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}


def test_circuits_init_keeps_an_operator_config_but_adds_the_sample(tmp_path):
    """The old `cp -Rn` kept an operator's cuzk.toml as it was, so demo-submit's circuit was
    unknown there; now the sample's table (and input root) is added, nothing overwritten."""
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.paths import confined_path

    init = _circuits_init()
    src, dest = _image_circuits(tmp_path), tmp_path / "vol"
    (dest / "mine").mkdir(parents=True)
    (dest / "mine" / "c.zkey").write_bytes(b"operator's")
    mine = '# my circuits\n[circuits.mine]\nkind = "mine"\nzkey = "mine/c.zkey"\n'
    (dest / "cuzk.toml").write_text(mine)
    init.main([str(src), str(dest)])
    text = (dest / "cuzk.toml").read_text()
    assert text.startswith("# my circuits") or "[circuits.mine]" in text
    settings = load_settings(path=dest / "cuzk.toml", env={"CUZK_SPOOL_DIR": str(tmp_path)})
    assert set(settings.circuits) == {"mine", "mulchain_1k"}
    assert settings.circuits["mine"].zkey == str(dest / "mine" / "c.zkey")
    assert (dest / "mine" / "c.zkey").read_bytes() == b"operator's"
    assert (dest / "mulchain_1k" / "circuit.zkey").exists()
    confined_path(str(dest / "mulchain_1k" / "input.json"), settings)  # the demo's input
    # an operator's own input roots are never widened; a broken file is never touched
    (dest / "cuzk.toml").write_text('allowed_input_roots = ["/data"]\n' + mine)
    init.main([str(src), str(dest)])
    settings = load_settings(path=dest / "cuzk.toml", env={})
    assert settings.allowed_input_roots == ("/data",) and "mulchain_1k" in settings.circuits
    (dest / "cuzk.toml").write_text("[circuits.mine\n")
    init.main([str(src), str(dest)])
    assert (dest / "cuzk.toml").read_text() == "[circuits.mine\n"
