"""Pure-Python reference implementation (Python ints) of the BN254 math.

Slow on purpose and written for clarity: it is the oracle that the native and
GPU cores are checked against in differential tests on small sizes.
"""
