"""cuzk-tasks: a Groth16 proving backend (snarkjs-compatible) on Celery and Redis."""

__version__ = "0.1.0"
