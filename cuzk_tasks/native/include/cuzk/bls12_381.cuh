// BLS12-381 (snarkjs "bls12381"): fields Fq (381 bits, 6 limbs), Fr (255 bits,
// 4 limbs), Fq2 = Fq[u]/(u^2 + 1), curves G1 (b = 4) and G2 (b = 4(1+u)),
// bundled as struct BLS12_381.  Host and device; constants come from the
// generated bls12_381_constants.cuh.  The arithmetic is the same templates as
// BN254's (field.cuh, curve.cuh).
#ifndef CUZK_BLS12_381_CUH
#define CUZK_BLS12_381_CUH

#include "compat.cuh"
#include "bls12_381_constants.cuh"
#include "field.cuh"
#include "curve.cuh"

namespace cuzk {

CUZK_CURVE_BUNDLE(BLS12_381, CUZK_BLS12_381);

}  // namespace cuzk

#endif  // CUZK_BLS12_381_CUH
