"""What the tests share, imported as ``from support.X import ...`` (pytest puts tests/ on
sys.path; the workers the tests start get it on PYTHONPATH from ``instruments.env``):

* ``processes``        real service processes: start/stop process groups, a Cluster of
                       workers with its Client, the no-false-idle SnapshotPoller
* ``redis_server``     a throwaway real redis-server (``cuzk_tasks.dev.local_redis``)
* ``instruments``      TEST ONLY prover with delays and a poison pill (``CUZK_PROVER``)
* ``snarkjs_tool``     the snarkjs CLI (node) and the fixture circuits
* ``cupy_emu``         CUDA kernels compiled with g++ behind a CuPy-like API (tests/cuda_emu/)
* ``outbox`` Recorder (a publisher that records) and queued (decoded broker messages)
"""
