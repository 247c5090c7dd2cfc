"""A recreated worker waits for its predecessor's unreleased host slot instead of taking
the next one (``docker compose up --force-recreate`` stops Redis before the workers, so the
old worker cannot release its slot at its stop).  State store on fakeredis and a real
redis-server (tests/conftest.py); real time, since slot TTLs are Redis expiries."""

from __future__ import annotations

import time

from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.service.worker import await_lapsing_slots

INTERVAL_S, TTL_S = 0.4, 1.0


def _settings():
    return load_settings(env={"CUZK_HOST_SLOT": "g", "CUZK_HEARTBEAT_INTERVAL_S": str(INTERVAL_S),
                              "CUZK_HEARTBEAT_TTL_S": str(TTL_S)})


def test_no_held_slot_means_no_wait(store):
    slept = []
    assert await_lapsing_slots(store, _settings(), sleep=slept.append) == []
    assert slept == [] and store.held_host_slots("g") == {}


def test_waits_for_the_stale_slot_and_not_for_the_live_one(store):
    live = store.claim_host_slot("g", "live:1", TTL_S)
    dead = store.claim_host_slot("g", "dead:2", TTL_S)
    assert (live.index, dead.index) == (0, 1)
    held = store.held_host_slots("g")
    assert sorted(held) == [0, 1] and all(0 < ms <= TTL_S * 1000 for ms in held.values())

    def sleep(seconds):  # the live holder renews its slot while the new worker waits
        time.sleep(seconds / 2)
        store.claim_host_slot("g", "live:1", TTL_S)
        time.sleep(seconds / 2)

    t0 = time.monotonic()
    assert await_lapsing_slots(store, _settings(), sleep=sleep) == [1]
    assert time.monotonic() - t0 < 1.5 * INTERVAL_S + TTL_S + 0.5
    # the dead holder's slot has lapsed: the new worker gets its predecessor's host name
    assert store.claim_host_slot("g", "new:3", TTL_S).index == 1
    assert sorted(store.held_host_slots("g")) == [0, 1]


def test_only_live_holders_claim_the_next_slot(store):
    store.claim_host_slot("g", "live:1", TTL_S)

    def sleep(seconds):
        time.sleep(seconds / 2)
        store.claim_host_slot("g", "live:1", TTL_S)
        time.sleep(seconds / 2)

    assert await_lapsing_slots(store, _settings(), sleep=sleep) == []
    assert store.claim_host_slot("g", "new:3", TTL_S).index == 1


# --- the same for a worker id held by a process that is gone (register_identity) -----------

def _register(store, holder, sleep=None):
    from cuzk_tasks.state import Registration
    from cuzk_tasks.service.worker import register_identity

    reg = Registration("device", "h", device=0, queue="q0")
    return register_identity(store, _settings(), "h:dev0", reg, holder, sleep=sleep)


def test_a_restart_waits_for_its_dead_predecessors_heartbeat(store, caplog):
    assert store.register_worker("h:dev0", "device", "h", device=0, queue="q0",
                                 holder="box:1", ttl_s=TTL_S)  # then killed: no more beats
    t0 = time.monotonic()
    with caplog.at_level("WARNING", logger="cuzk_tasks.service.worker"):
        assert _register(store, "box:2")
    assert time.monotonic() - t0 < 1.5 * INTERVAL_S + TTL_S + 0.5
    assert store.redis.hget(store.keys.worker("h:dev0"), "holder") == "box:2"
    assert "is not renewed" in caplog.text and "box:1" in caplog.text


def test_a_live_holder_is_named_and_the_second_process_refused(store):
    from cuzk_tasks.errors import IdentityHeldError

    assert store.register_worker("h:dev0", "device", "h", device=0, queue="q0",
                                 holder="box:1", ttl_s=TTL_S)

    def sleep(seconds):  # the holder beats while the newcomer watches
        for _ in range(4):
            time.sleep(seconds / 4)
            store.heartbeat("h:dev0", TTL_S, holder="box:1")

    try:
        _register(store, "box:2", sleep=sleep)
    except IdentityHeldError as exc:
        text = str(exc)
    else:
        raise AssertionError("a second process took a live worker id")
    assert "process 1 on host box" in text and "CUZK_HOSTNAME" in text
    assert store.redis.hget(store.keys.worker("h:dev0"), "holder") == "box:1"


def test_a_holder_that_lost_its_id_is_told_once(store):
    """A process whose heartbeat lapsed (stalled) and whose id another process claimed
    meanwhile: its next beat changes nothing and asks it to stop, once."""
    from cuzk_tasks.service.worker import Heartbeat

    assert store.register_worker("h:dev0", "device", "h", device=0, queue="q0",
                                 holder="box:2", ttl_s=TTL_S)
    lost = []
    beat = Heartbeat(store, "h:dev0", _settings(), extra={"pid": 1}, holder="box:1",
                     on_lost=lambda: lost.append(1))
    assert beat.beat().held_by == "box:2" and beat.beat().held_by == "box:2"
    assert lost == [1] and beat.lost_to == "box:2"
    assert store.get_worker("h:dev0").get("pid") is None  # nothing of box:1's was written
    # nor does its stop (worker.mark_offline) take the holder's heartbeat away
    assert not store.worker_offline("h:dev0", holder="box:1")
    assert store.get_worker("h:dev0")["online"]
