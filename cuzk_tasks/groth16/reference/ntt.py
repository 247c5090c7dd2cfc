"""Number-theoretic transforms over Fr and snarkjs's H computation, on lists of ints.

Roots of unity follow ffjavascript (and so snarkjs): the primitive 2^s-th root
(2^s the largest power of two dividing r - 1) is nqr^((r-1)/2^s) with nqr the smallest
quadratic non-residue, and the 2^k-th root is its 2^(s-k)-th power
(:attr:`Curve.root_of_unity`).  The zkey's H points are the Lagrange basis of exactly
this domain's odd coset, so the roots must match bit for bit.

Every function takes the curve (default BN254, s = 28; BLS12-381 has s = 32); the
module constants are BN254's.
"""

from ..curves import BN254

TWO_ADICITY = BN254.two_adicity
NQR = BN254.fr_nqr
ROOT_2_28 = BN254.root_of_unity


def root_of_unity(log_n, curve=BN254):
    """Primitive 2^log_n-th root of unity in Fr (snarkjs convention)."""
    s = curve.two_adicity
    if not 0 <= log_n <= s:
        raise ValueError(f"log_n must be in [0, {s}], got {log_n}")
    return pow(curve.root_of_unity, 1 << (s - log_n), curve.r)


def roots_of_unity(log_n, curve=BN254):
    """[ω^0, ω^1, ..., ω^(n-1)] for the 2^log_n domain."""
    w, FR = root_of_unity(log_n, curve), curve.r
    out = [1] * (1 << log_n)
    for i in range(1, len(out)):
        out[i] = out[i - 1] * w % FR
    return out


def ntt(values, log_n, curve=BN254):
    """Evaluations at ω^i of the polynomial with coefficients ``values`` (naive O(n^2))."""
    n, FR = 1 << log_n, curve.r
    if len(values) != n:
        raise ValueError(f"expected {n} values, got {len(values)}")
    w = root_of_unity(log_n, curve)
    out = []
    for i in range(n):
        wi = pow(w, i, FR)
        acc, x = 0, 1
        for v in values:
            acc += v * x
            x = x * wi % FR
        out.append(acc % FR)
    return out


def intt(values, log_n, curve=BN254):
    """Coefficients of the polynomial whose evaluations at ω^i are ``values``."""
    n, FR = 1 << log_n, curve.r
    w_inv = pow(root_of_unity(log_n, curve), -1, FR)
    n_inv = pow(n, -1, FR)
    out = []
    for i in range(n):
        wi = pow(w_inv, i, FR)
        acc, x = 0, 1
        for v in values:
            acc += v * x
            x = x * wi % FR
        out.append(acc * n_inv % FR)
    return out


def to_odd_coset(evals, log_n, curve=BN254):
    """Re-evaluate a polynomial given on the domain at the odd coset ω_2n·ω^i."""
    FR = curve.r
    coeffs = intt(evals, log_n, curve)
    shift = root_of_unity(log_n + 1, curve)
    twisted = [c * pow(shift, i, FR) % FR for i, c in enumerate(coeffs)]
    return ntt(twisted, log_n, curve)


def compute_h(a_evals, b_evals, log_n, curve=BN254):
    """snarkjs's H: with C = A∘B, H_i = A'_i·B'_i − C'_i on the odd coset."""
    FR = curve.r
    c_evals = [a * b % FR for a, b in zip(a_evals, b_evals)]
    a_coset = to_odd_coset(a_evals, log_n, curve)
    b_coset = to_odd_coset(b_evals, log_n, curve)
    c_coset = to_odd_coset(c_evals, log_n, curve)
    return [(a * b - c) % FR for a, b, c in zip(a_coset, b_coset, c_coset)]
