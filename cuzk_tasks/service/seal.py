"""Stage messages sealed by the service: a forged or altered one is refused before it runs.

A stage message (synthesize, prove, finalize) crosses a broker that callers write to, and
its fields decide what is proved and where the proof goes: a witness path, a circuit, a
partial proof.  So each one carries a **seal** (kwarg ``seal``): an HMAC-SHA256, under the
deployment's stage key, of its task name, args and kwargs.  The process that builds the
message seals it (:class:`cuzk_tasks.service.messages.StageMessages`); a worker's main
process checks it before the message reaches a pool process
(:class:`cuzk_tasks.service.safe_request.SafeRequest`), and a message whose seal is
missing or does not match is refused once, recorded, and changes nothing.

The key lives in a file only the service's processes read (``stage_key_file``,
``CUZK_STAGE_KEY_FILE``): never in Redis, so a caller holding the Redis password -- who
can read every message, seal included -- still cannot make one.  A seal read off a real
message fits that message alone; sent again, it is the duplicate that the state store's
guards (state, attempt, token) already turn into a no-op.

Why not Celery's message signing (``task_serializer="auth"``): it needs a certificate
and key per worker and a ``cryptography`` dependency, signs the whole message, broker
headers included, with RSA (milliseconds per message on the device's hand-over), and applies
to every task, so the by-name requests of callers in other languages would need signing too.
One shared HMAC key over the stage messages alone costs microseconds and nothing to callers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets

from ..errors import ConfigError
from ..settings import defaults

#: the message kwarg that carries the seal
SEAL_KWARG = "seal"

_SEAL_PREFIX = "v1:"  # the scheme, so a later one can be told apart


def _canonical(task: str, args, kwargs) -> bytes:
    """The sealed text: task, args and kwargs (less the seal) as canonical JSON, the same
    whether built here or decoded from the broker's JSON (tuples arrive as lists)."""
    fields = {k: v for k, v in kwargs.items() if k != SEAL_KWARG}
    return json.dumps([task, list(args), fields], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode()


class StageSeal:
    """Seals and checks stage messages with one stage key (``defaults.STAGE_KEY_BYTES``)."""

    def __init__(self, key: bytes):
        if len(key) < defaults.STAGE_KEY_BYTES:
            raise ConfigError(f"stage key: expected at least {defaults.STAGE_KEY_BYTES} bytes, "
                              f"got {len(key)}")
        self._key = key
        #: names the key without revealing it (a worker advertises it; mismatches are refused
        #: at start, :func:`check_peers`)
        self.key_id = hashlib.sha256(b"cuzk-tasks stage key id\0" + key).hexdigest()[:16]

    def seal(self, task: str, args, kwargs) -> str:
        mac = hmac.new(self._key, _canonical(task, args, kwargs), hashlib.sha256)
        return _SEAL_PREFIX + mac.hexdigest()

    def problem(self, task: str, args, kwargs) -> str | None:
        """Why a stage message of ``task`` must not run (its seal missing or not this
        deployment's for exactly these fields), or None.  Never echoes a field."""
        given = kwargs.get(SEAL_KWARG) if isinstance(kwargs, dict) else None
        if not isinstance(given, str) or not given:
            return (f"{task}: the message has no seal: stage messages are sent by the service "
                    "itself, never by callers (submit with cuzk.submit)")
        if not hmac.compare_digest(given, self.seal(task, args, kwargs)):
            return (f"{task}: the message's seal does not match its fields (forged or altered, "
                    "or sealed with another stage key: CUZK_STAGE_KEY_FILE)")
        return None

    @classmethod
    def load(cls, path: str, create: bool) -> "StageSeal | None":
        """The seal of the key in ``path`` (``~`` expanded): 64 hex digits.  Missing: with
        ``create``, a new random key is written there (mode 0600, its directory 0700; of two
        processes racing, both use the first's), else None.  ConfigError naming the file for
        one that cannot be read, written or parsed."""
        path = os.path.expanduser(path)
        try:
            with open(path, "rb") as f:
                text = f.read(4096)
        except FileNotFoundError:
            if not create:
                return None
            text = _create_key(path)
        except OSError as exc:
            raise ConfigError(f"stage_key_file {path}: cannot read it ({exc.strerror}): "
                              "CUZK_STAGE_KEY_FILE") from None
        try:
            key = bytes.fromhex(text.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            key = b""
        if len(key) < defaults.STAGE_KEY_BYTES:
            raise ConfigError(f"stage_key_file {path}: expected {2 * defaults.STAGE_KEY_BYTES} "
                              "hex digits (delete it to have a new key made)")
        return cls(key)


def _create_key(path: str) -> bytes:
    """Write a new key at ``path`` unless one appears there first: written whole to a file of
    this process's, then linked into place (a link never replaces a file), so a process racing
    this one reads either no key or the whole of the one that won."""
    text = (secrets.token_hex(defaults.STAGE_KEY_BYTES) + "\n").encode()
    staged = f"{path}.{os.getpid()}.new"
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(text)
        try:
            os.link(staged, path)
        except FileExistsError:  # another process made it first: use that one
            with open(path, "rb") as f:
                text = f.read(4096)
    except OSError as exc:
        raise ConfigError(f"stage_key_file {path}: cannot create it ({exc.strerror}): set "
                          "CUZK_STAGE_KEY_FILE to a writable path, or put the deployment's "
                          "key there") from None
    finally:
        try:
            os.unlink(staged)
        except OSError:
            pass
    return text


def check_peers(seal: StageSeal, workers) -> None:
    """ConfigError when a live worker of the deployment (``workers``: the state store's
    ``all_workers()``) advertises another stage key: its messages and ours would refuse
    each other, and every job would stall."""
    others = sorted({w.get("stage_key_id") for w in workers
                     if w.get("online") and w.get("stage_key_id")} - {seal.key_id})
    if others:
        live = [w["worker_id"] for w in workers if w.get("online")
                and w.get("stage_key_id") in others]
        raise ConfigError(f"stage key {seal.key_id} differs from the one live workers use "
                          f"({', '.join(others)}: {', '.join(live[:3])}): every worker of a "
                          "deployment needs the same stage_key_file (CUZK_STAGE_KEY_FILE)")
