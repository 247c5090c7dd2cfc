"""The circuit bundled for `cuzk-tasks demo` is the tested mulchain_1k fixture, byte for byte."""

import pathlib

import pytest

from support.snarkjs_tool import fixture_dir

DATA = pathlib.Path(__file__).resolve().parent.parent / "cuzk_tasks" / "data" / "mulchain_1k"


@pytest.mark.parametrize("name", ["circuit.zkey", "circuit.wasm", "circuit.sym",
                                  "verification_key.json", "input.json"])
def test_bundled_demo_circuit_matches_fixture(name):
    assert (DATA / name).read_bytes() == (fixture_dir("mulchain_1k") / name).read_bytes()
