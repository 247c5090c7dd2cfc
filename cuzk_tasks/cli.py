"""The ``cuzk-tasks`` command line.

Argument order matches snarkjs and rapidsnark so the commands drop in:

    cuzk-tasks prove   circuit.zkey witness.wtns proof.json public.json
    cuzk-tasks verify  verification_key.json public.json proof.json
    cuzk-tasks witness circuit.wasm input.json witness.wtns
    cuzk-tasks vkey    circuit.zkey verification_key.json
"""

import argparse
import logging
import sys
import time

from .errors import CuzkError

EXIT_OK, EXIT_INVALID, EXIT_ERROR = 0, 1, 2


def _cmd_prove(args):
    from .groth16 import jsonio
    from .groth16.backends import get_backend
    from .groth16.prover import prove_finish, prove_start
    from .groth16.wtns import read_wtns
    from .groth16.zkey import read_zkey

    t0 = time.perf_counter()
    zkey = read_zkey(args.zkey)
    witness = read_wtns(args.witness, expected_length=zkey.n_vars)
    backend = get_backend(args.backend)
    partial = prove_start(zkey, witness, backend=backend)
    proof, public = prove_finish(partial, zkey, witness, verify=not args.no_verify)
    jsonio.dump_json(proof, args.proof)
    jsonio.dump_json(public, args.public)
    if args.verbose:
        steps = ", ".join(f"{k} {v:.0f} ms" for k, v in partial.timings_ms.items())
        print(f"proved {args.zkey} on {partial.backend} in {(time.perf_counter() - t0) * 1000:.0f} ms "
              f"({steps})", file=sys.stderr)
    return EXIT_OK


def _cmd_verify(args):
    from .groth16.verifier import verify_files

    if verify_files(args.verification_key, args.public, args.proof):
        print("OK: proof is valid")
        return EXIT_OK
    print("INVALID: proof does not verify", file=sys.stderr)
    return EXIT_INVALID


def _cmd_witness(args):
    from .groth16.witness import generate_witness

    generate_witness(args.wasm, args.input, args.witness)
    return EXIT_OK


def _cmd_vkey(args):
    from .groth16 import jsonio
    from .groth16.verifier import export_verification_key
    from .groth16.zkey import read_zkey

    jsonio.dump_json(export_verification_key(read_zkey(args.zkey)), args.verification_key)
    return EXIT_OK


def build_parser():
    parser = argparse.ArgumentParser(prog="cuzk-tasks", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print step timings and debug logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("prove", help="make a Groth16 proof (snarkjs groth16 prove compatible)")
    p.add_argument("zkey")
    p.add_argument("witness", help="witness .wtns file")
    p.add_argument("proof", help="output proof.json")
    p.add_argument("public", help="output public.json")
    p.add_argument("--backend", choices=("auto", "cpu", "gpu"), default=None,
                   help="compute backend (default: $CUZK_BACKEND or auto)")
    p.add_argument("--no-verify", action="store_true",
                   help="skip the self-verification pairing check (not recommended)")
    p.set_defaults(func=_cmd_prove)

    p = sub.add_parser("verify", help="verify a proof (snarkjs groth16 verify compatible)")
    p.add_argument("verification_key")
    p.add_argument("public")
    p.add_argument("proof")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("witness", help="compute a witness from circom's .wasm and an input.json")
    p.add_argument("wasm")
    p.add_argument("input")
    p.add_argument("witness", help="output .wtns file")
    p.set_defaults(func=_cmd_witness)

    p = sub.add_parser("vkey", help="export the verification key of a zkey")
    p.add_argument("zkey")
    p.add_argument("verification_key", help="output verification_key.json")
    p.set_defaults(func=_cmd_vkey)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except CuzkError as exc:
        print(f"cuzk-tasks {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"cuzk-tasks {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
