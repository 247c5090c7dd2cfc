"""Redis memory per finished partition, through the real transitions (ops/redis/README.md,
"Sizing maxmemory").

    python bench/redis_memory.py [--partitions 500]

Runs a private redis-server, pushes N partitions of the mulchain fixture (10 per job, with
its real proof and public signals) from create_job to finalize_end, and prints the growth of
``used_memory`` per partition and ``MEMORY USAGE`` of one partition hash, job hash and
result.  The baseline is the server's own ``used_memory`` before the run.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None):
    from cuzk_tasks.dev.local_redis import LocalRedis
    from cuzk_tasks.state import PartitionRun, StateStore

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=500)
    args = ap.parse_args(argv)
    fix = ROOT / "tests" / "fixtures" / "mulchain"
    proof, public = (fix / "proof.json").read_text(), (fix / "public.json").read_text()
    inputs = (fix / "input.json").read_text()
    server = LocalRedis()
    try:
        store = StateStore.from_url(server.url)
        store.register_worker("bench:dev0", "device", "bench", device=0, queue="q")
        store.heartbeat("bench:dev0", 600)
        base = int(store.redis.info("memory")["used_memory"])
        n_jobs = max(1, args.partitions // 10)
        for _ in range(n_jobs):
            job = uuid.uuid4().hex
            store.create_job(job, "mulchain", "bench", 5, "req-" + job, [{"input": inputs}] * 10)
            for i in range(10):
                store.synth_begin(PartitionRun(job, i, 0))
                store.synth_end(PartitionRun(job, i, 0), f"/spool/{job}/{i}.wtns", 1.0)
                store.route(PartitionRun(job, i, 0), "bench:dev0")
                token = store.prove_begin("bench:dev0", PartitionRun(job, i, 0), 3).token
                store.prove_end("bench:dev0", token, PartitionRun(job, i, 0), 1.0)
                store.finalize_end(PartitionRun(job, i, 0), 1.0, proof, public, token=token)
        used = int(store.redis.info("memory")["used_memory"])
        n = n_jobs * 10
        print(f"{n} finished partitions: used_memory +{(used - base) / n:.0f} B per partition "
              f"(everything: hashes, result, events, indexes; baseline {base} B)")
        print(f"one partition hash {store.redis.memory_usage(store.keys.part(job, 0))} B, "
              f"one job hash {store.redis.memory_usage(store.keys.job(job))} B, "
              f"one result of 10 proofs {store.redis.memory_usage(store.keys.result(job))} B")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
