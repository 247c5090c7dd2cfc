// BN254 (snarkjs "bn128"): fields Fq (base), Fr (scalar), Fq2 = Fq[u]/(u^2 + 1),
// curves G1 (b = 3) and G2 (b = 3/(9+u)), bundled as struct BN254.  Host and
// device; constants come from the generated bn254_constants.cuh.
//
// The BN254 types are also cuzk::Fq, cuzk::Fr, cuzk::Fq2, cuzk::G1, cuzk::G2
// (the names the code had before there was a second curve).
#ifndef CUZK_BN254_CUH
#define CUZK_BN254_CUH

#include "compat.cuh"
#include "bn254_constants.cuh"
#include "field.cuh"
#include "curve.cuh"

namespace cuzk {

CUZK_CURVE_BUNDLE(BN254, CUZK);

typedef BN254::FqParams FqParams;
typedef BN254::FrParams FrParams;
typedef BN254::Fq Fq;
typedef BN254::Fr Fr;
typedef BN254::Fq2 Fq2;
typedef BN254::G1Params G1Params;
typedef BN254::G2Params G2Params;
typedef BN254::G1 G1;
typedef BN254::G2 G2;

}  // namespace cuzk

#endif  // CUZK_BN254_CUH
