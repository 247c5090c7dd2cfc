"""BN254 prime fields Fq, Fr and the quadratic extension Fq2 = Fq[u]/(u^2 + 1)."""

FQ = 21888242871839275222246405745257275088696311157297823662689037894645226208583
"""Base field modulus q of BN254 (alt_bn128, snarkjs's "bn128")."""

FR = 21888242871839275222246405745257275088548364400416034343698204186575808495617
"""Scalar field modulus r (the group order)."""

MONT_R = 1 << 256
"""Montgomery radix used by snarkjs/ffjavascript and by our native core."""


def to_mont(x, m):
    return x * MONT_R % m


def from_mont(x, m):
    return x * pow(MONT_R, -1, m) % m


def inv(x, m):
    if x % m == 0:
        raise ZeroDivisionError("inverse of zero")
    return pow(x, -1, m)


def is_quadratic_residue(x, m):
    return x % m == 0 or pow(x, (m - 1) // 2, m) == 1


def sqrt_fq(x):
    """Square root in Fq (q = 3 mod 4), or None when x is not a square."""
    x %= FQ
    y = pow(x, (FQ + 1) // 4, FQ)
    return y if y * y % FQ == x else None


# --- Fq2 = Fq[u] / (u^2 + 1); elements are (c0, c1) meaning c0 + c1*u ---

FQ2_ZERO = (0, 0)
FQ2_ONE = (1, 0)


def fq2_add(a, b):
    return ((a[0] + b[0]) % FQ, (a[1] + b[1]) % FQ)


def fq2_sub(a, b):
    return ((a[0] - b[0]) % FQ, (a[1] - b[1]) % FQ)


def fq2_neg(a):
    return (-a[0] % FQ, -a[1] % FQ)


def fq2_mul(a, b):
    return ((a[0] * b[0] - a[1] * b[1]) % FQ, (a[0] * b[1] + a[1] * b[0]) % FQ)


def fq2_sqr(a):
    return fq2_mul(a, a)


def fq2_scale(a, k):
    return (a[0] * k % FQ, a[1] * k % FQ)


def fq2_inv(a):
    norm = (a[0] * a[0] + a[1] * a[1]) % FQ
    n_inv = inv(norm, FQ)
    return (a[0] * n_inv % FQ, -a[1] * n_inv % FQ)


def fq2_conj(a):
    return (a[0], -a[1] % FQ)


XI = (9, 1)
"""The non-residue 9 + u defining the sextic twist and the Fq6/Fq12 tower."""
