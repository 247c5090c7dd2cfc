"""Number-theoretic transforms over Fr and snarkjs's H computation, on lists of ints.

Roots of unity follow ffjavascript (and so snarkjs): the primitive 2^28-th root
is nqr^((r-1)/2^28) with nqr the smallest quadratic non-residue, and the
2^k-th root is its 2^(28-k)-th power.  The zkey's H points are the Lagrange
basis of exactly this domain's odd coset, so the roots must match bit for bit.
"""

from .field import FR, is_quadratic_residue

TWO_ADICITY = 28


def _smallest_non_residue():
    candidate = 2
    while is_quadratic_residue(candidate, FR):
        candidate += 1
    return candidate


NQR = _smallest_non_residue()
ROOT_2_28 = pow(NQR, (FR - 1) >> TWO_ADICITY, FR)


def root_of_unity(log_n):
    """Primitive 2^log_n-th root of unity in Fr (snarkjs convention)."""
    if not 0 <= log_n <= TWO_ADICITY:
        raise ValueError(f"log_n must be in [0, {TWO_ADICITY}], got {log_n}")
    return pow(ROOT_2_28, 1 << (TWO_ADICITY - log_n), FR)


def roots_of_unity(log_n):
    """[ω^0, ω^1, ..., ω^(n-1)] for the 2^log_n domain."""
    w = root_of_unity(log_n)
    out = [1] * (1 << log_n)
    for i in range(1, len(out)):
        out[i] = out[i - 1] * w % FR
    return out


def ntt(values, log_n):
    """Evaluations at ω^i of the polynomial with coefficients ``values`` (naive O(n^2))."""
    n = 1 << log_n
    if len(values) != n:
        raise ValueError(f"expected {n} values, got {len(values)}")
    w = root_of_unity(log_n)
    out = []
    for i in range(n):
        wi = pow(w, i, FR)
        acc, x = 0, 1
        for v in values:
            acc += v * x
            x = x * wi % FR
        out.append(acc % FR)
    return out


def intt(values, log_n):
    """Coefficients of the polynomial whose evaluations at ω^i are ``values``."""
    n = 1 << log_n
    w_inv = pow(root_of_unity(log_n), -1, FR)
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


def to_odd_coset(evals, log_n):
    """Re-evaluate a polynomial given on the domain at the odd coset ω_2n·ω^i."""
    coeffs = intt(evals, log_n)
    shift = root_of_unity(log_n + 1)
    twisted = [c * pow(shift, i, FR) % FR for i, c in enumerate(coeffs)]
    return ntt(twisted, log_n)


def compute_h(a_evals, b_evals, log_n):
    """snarkjs's H: with C = A∘B, H_i = A'_i·B'_i − C'_i on the odd coset."""
    c_evals = [a * b % FR for a, b in zip(a_evals, b_evals)]
    a_coset = to_odd_coset(a_evals, log_n)
    b_coset = to_odd_coset(b_evals, log_n)
    c_coset = to_odd_coset(c_evals, log_n)
    return [(a * b - c) % FR for a, b, c in zip(a_coset, b_coset, c_coset)]
