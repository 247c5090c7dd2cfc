"""Circuit registry and the LRU budget of resident zkeys."""

import os
import pathlib

import pytest

from cuzk_tasks.settings.config import CircuitSpec
from cuzk_tasks.errors import CuzkError
from cuzk_tasks.pipeline.registry import CircuitRegistry, ResidentZkeys

FIX = pathlib.Path(__file__).resolve().parent / "fixtures"


def _registry():
    return CircuitRegistry({name: CircuitSpec(name=name, zkey=str(FIX / name / "circuit.zkey"),
                                              wasm=str(FIX / name / "circuit.wasm"))
                            for name in ("mulchain", "poseidon", "mulchain_1k")})


def test_unknown_circuit_is_a_clear_error():
    with pytest.raises(CuzkError, match=r"unknown circuit 'nope' \(known circuits: mulchain, "):
        _registry().get("nope")


def test_resident_zkeys_load_once_and_evict_lru_over_budget():
    published = []
    sizes = {n: os.path.getsize(FIX / n / "circuit.zkey") for n in ("mulchain", "poseidon")}
    budget_mb = (sizes["mulchain"] + sizes["poseidon"]) / (1 << 20)
    res = ResidentZkeys(_registry(), budget_mb, on_change=published.append)
    z1 = res.get("mulchain")
    assert res.get("mulchain") is z1            # loaded once
    res.get("poseidon")
    assert res.names() == ["mulchain", "poseidon"]
    res.get("mulchain")                         # mulchain is now most recently used
    res.get("mulchain_1k")                      # over budget: poseidon (LRU) goes
    assert "poseidon" not in res and "mulchain_1k" in res
    assert res.used_bytes() <= budget_mb * (1 << 20) or len(res.names()) == 1
    assert published[-1] == res.names()


def test_a_zkey_larger_than_the_budget_is_still_held_alone():
    res = ResidentZkeys(_registry(), 0.000001)
    res.get("mulchain")
    res.get("poseidon")
    assert res.names() == ["poseidon"]
