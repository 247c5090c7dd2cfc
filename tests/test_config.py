"""Settings from TOML and environment; the Celery app's safety settings."""

import pickle

import pytest

from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.errors import ConfigError, CuzkError


def write(tmp_path, text, name="cuzk.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_defaults_and_derived_urls():
    s = load_settings(env={})
    assert s.redis_url == "redis://localhost:6379/0"
    assert s.broker_url == s.result_backend == s.state_url == s.redis_url
    assert s.cpu_queue == "cuzk.cpu"
    assert s.time_limit_s < s.visibility_timeout_s
    assert s.prover == "groth16"


def test_env_overrides_and_separate_urls():
    env = {"CUZK_REDIS_URL": "redis://r:1/0", "CUZK_STATE_URL": "redis://state:2/3",
           "CUZK_HOSTNAME": "box", "CUZK_HEARTBEAT_TTL_S": "3", "CUZK_HEARTBEAT_INTERVAL_S": "0.5"}
    s = load_settings(env=env)
    assert s.broker_url == "redis://r:1/0" and s.state_url == "redis://state:2/3"
    assert s.device_queue(1) == "cuzk.dev.box.1"
    assert s.device_worker_id(1) == "box:dev1"
    assert s.heartbeat_ttl_s == 3.0


def test_toml_circuits_resolve_relative_paths(tmp_path):
    path = write(tmp_path, """
prefix = "t"
max_deliveries = 2
[circuits.poseidon]
kind = "porep-c2"
zkey = "p/circuit.zkey"
wasm = "/abs/circuit.wasm"
priority = 3
""")
    s = load_settings(path, env={})
    spec = s.circuits["poseidon"]
    assert spec.kind == "porep-c2" and spec.priority == 3
    assert spec.zkey == str(tmp_path / "p" / "circuit.zkey")
    assert spec.wasm == "/abs/circuit.wasm"
    assert s.prefix == "t" and s.max_deliveries == 2


def test_config_env_var_names_file(tmp_path):
    path = write(tmp_path, 'prefix = "x"\n')
    assert load_settings(env={"CUZK_CONFIG": path}).prefix == "x"


@pytest.mark.parametrize("text, needle", [
    ('time_limit_s = 100\nvisibility_timeout_s = 50\nsoft_time_limit_s = 10\n', "time_limit_s"),
    ('heartbeat_ttl_s = "soon"\n', "heartbeat_ttl_s"),
    ('bogus = 1\n', "bogus"),
    ('[circuits.a]\nwasm = "x.wasm"\n', "circuits.a.zkey"),
    ('[circuits.a]\nzkey = "x"\npriority = 12\n', "circuits.a.priority"),
    ('prefix = \n', "invalid TOML"),
])
def test_bad_config_names_file_and_field(tmp_path, text, needle):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={})
    assert needle in str(info.value) and path in str(info.value)
    assert isinstance(info.value, CuzkError)


def test_bad_env_names_variable():
    with pytest.raises(ConfigError, match="CUZK_MAX_DELIVERIES"):
        load_settings(env={"CUZK_MAX_DELIVERIES": "many"})


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_settings(str(tmp_path / "nope.toml"), env={})


def test_app_settings_json_only_acks_late():
    from cuzk_tasks.celery_app import create_app

    app = create_app(load_settings(env={}))
    c = app.conf
    assert c.task_serializer == "json" and c.result_serializer == "json"
    assert list(c.accept_content) == ["json"]
    assert c.task_acks_late and c.task_reject_on_worker_lost
    assert c.worker_prefetch_multiplier == 1
    assert c.task_time_limit < c.broker_transport_options["visibility_timeout"]
    assert (c.broker_transport_options["visibility_timeout"]
            == c.result_backend_transport_options["visibility_timeout"])
    assert app.amqp.router.route({}, "cuzk.finalize")["queue"].name == "cuzk.cpu-stages"
    for name in ("cuzk.submit", "cuzk.synthesize", "cuzk.prove", "cuzk.finalize"):
        assert name in app.tasks


def test_task_events_are_on_for_flower_and_celery_events():
    """Issue 26: Flower and `celery events` see the tasks (tests/test_celery_tools.py runs Flower)."""
    from cuzk_tasks.celery_app import create_app

    c = create_app(load_settings(env={})).conf
    assert c.worker_send_task_events is True and c.task_send_sent_event is True


def test_pickle_message_is_refused():
    from kombu.exceptions import ContentDisallowed
    from kombu.serialization import loads

    from cuzk_tasks.celery_app import create_app

    app = create_app(load_settings(env={}))
    body = pickle.dumps(((), {"circuit": "x"}, {}))
    with pytest.raises(ContentDisallowed):
        loads(body, "application/x-python-serialize", "binary", accept=app.conf.accept_content)


def test_pool_processes_have_a_memory_ceiling_by_default():
    """Issue 11: a second line of defence against leaks (Celery's max_memory_per_child):
    8 GiB per pool process by default, plus the resident zkeys' budget on a device worker."""
    from cuzk_tasks.service.worker import max_memory_per_child_kib

    settings = load_settings(env={})
    assert settings.max_memory_per_child_mb == 8192
    assert max_memory_per_child_kib(settings, "cpu") == 8192 * 1024
    assert max_memory_per_child_kib(settings, "device") == (8192 + settings.zkey_budget_mb) * 1024
    off = load_settings(env={"CUZK_MAX_MEMORY_PER_CHILD_MB": "0"})
    assert max_memory_per_child_kib(off, "cpu") is None
    with pytest.raises(ConfigError, match="max_memory_per_child_mb"):
        load_settings(env={"CUZK_MAX_MEMORY_PER_CHILD_MB": "-1"})


def test_sentinel_urls_need_the_master_name_and_parse():
    """Issue 11: sentinel://host:port;sentinel://... (kombu's form) for broker, result
    backend and state store, with CUZK_SENTINEL_MASTER naming the group."""
    from cuzk_tasks.settings import redis_url

    url = "sentinel://:s3cret@10.0.0.5:26379/2;sentinel://10.0.0.6:26380;sentinel://h7"
    with pytest.raises(ConfigError, match="CUZK_SENTINEL_MASTER") as refused:
        load_settings(env={"CUZK_REDIS_URL": url})
    assert "s3cret" not in str(refused.value)
    settings = load_settings(env={"CUZK_REDIS_URL": url, "CUZK_SENTINEL_MASTER": "cuzk"})
    assert settings.broker_url == settings.state_url == url and settings.broker_is_state_redis
    nodes, master = redis_url.sentinel_nodes(url)
    assert nodes == [("10.0.0.5", 26379), ("10.0.0.6", 26380), ("h7", 26379)]
    assert master == {"password": "s3cret", "db": 2}
    assert "s3cret" not in redis_url.redact(url) and "***" in redis_url.redact(url)
    with pytest.raises(ConfigError, match="sentinel"):
        load_settings(env={"CUZK_REDIS_URL": "sentinel://", "CUZK_SENTINEL_MASTER": "cuzk"})


def test_a_sentinel_broker_uses_kombus_sentinel_transport_with_the_master_name():
    from kombu.transport.redis import SentinelTransport

    from cuzk_tasks.celery_app import create_app

    url = "sentinel://127.0.0.1:26379;sentinel://127.0.0.1:26380"
    app = create_app(load_settings(env={"CUZK_REDIS_URL": url, "CUZK_SENTINEL_MASTER": "cuzk"}))
    assert app.conf.broker_transport_options["master_name"] == "cuzk"
    assert app.conf.result_backend_transport_options["master_name"] == "cuzk"
    assert type(app.connection_for_write().transport) is SentinelTransport  # kombu's own


def test_the_prover_is_a_setting_and_a_bad_one_says_what_it_expects():
    """prove_start and finalize have one path: tests and benchmarks swap the whole prover
    (CUZK_PROVER=module:Class), the product's is groth16."""
    from cuzk_tasks.pipeline import Context
    from cuzk_tasks.pipeline.provers import Groth16Prover

    assert isinstance(Context(None, load_settings(env={})).prover, Groth16Prover)
    with pytest.raises(ConfigError, match="prover"):
        load_settings(env={"CUZK_PROVER": "not a class"})
    ctx = Context(None, load_settings(env={"CUZK_PROVER": "no_such_module:Prover"}))
    with pytest.raises(ConfigError, match="cannot load 'no_such_module:Prover'"):
        ctx.prover  # noqa: B018
    from support.instruments import InstrumentedProver

    ctx = Context(None, load_settings(env={"CUZK_PROVER": "support.instruments:InstrumentedProver"}))
    assert isinstance(ctx.prover, InstrumentedProver)


def test_a_worker_identity_reaches_its_pool_processes_through_the_app():
    """Not through os.environ: cuzk-tasks worker sets it on the Celery app before the fork."""
    import os

    from cuzk_tasks import pipeline
    from cuzk_tasks.celery_app import create_app

    app = create_app(load_settings(env={}))
    app.cuzk_identity = pipeline.WorkerIdentity("h:dev3", "device", "cpu")
    ctx = pipeline.context(app)
    assert (ctx.worker_id, ctx.identity.role, ctx.backend_name) == ("h:dev3", "device", "cpu")
    assert "CUZK_WORKER_ID" not in os.environ


def test_the_witness_time_limit_fires_before_the_soft_time_limit():
    """issue 24: Celery's soft limit cannot interrupt a wasm call, so the witness limit a
    worker uses is at most 90 % of it."""
    s = load_settings(env={})
    assert (s.witness_time_limit_s, s.witness_limit_s) == (1500, 1500)
    s = load_settings(env={"CUZK_WITNESS_TIME_LIMIT_S": "2.5"})
    assert s.witness_limit_s == 2.5
    s = load_settings(env={"CUZK_SOFT_TIME_LIMIT_S": "100", "CUZK_TIME_LIMIT_S": "200"})
    assert s.witness_limit_s == 90
    with pytest.raises(ConfigError, match="witness_time_limit_s"):
        load_settings(env={"CUZK_WITNESS_TIME_LIMIT_S": "0"})


def test_a_unix_socket_redis_url_reaches_broker_and_result_backend(tmp_path):
    """``unix://`` (a Redis unix socket, redis_url.SCHEMES) works for the broker and the
    result backend too: kombu and Celery know it only as ``redis+socket://``
    (redis_url.celery_url), so a message sent and a result stored both land in that Redis."""
    from support.redis_server import RedisServer, have_redis_server

    if not have_redis_server():
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    from cuzk_tasks.celery_app import create_app

    sock = tmp_path / "redis.sock"
    server = RedisServer(extra_args=["--unixsocket", str(sock), "--unixsocketperm", "700"])
    try:
        settings = load_settings(env={"CUZK_REDIS_URL": f"unix://{sock}"})
        app = create_app(settings)
        app.send_task("cuzk.test.nothing", queue="unixq").forget()
        app.backend.store_result("unix-socket-job", {"ok": 1}, "SUCCESS")
        import redis

        direct = redis.Redis(unix_socket_path=str(sock))
        assert direct.llen("unixq") == 1
        assert app.backend.get_task_meta("unix-socket-job")["result"] == {"ok": 1}
    finally:
        server.stop()
