"""The file formats of circom and snarkjs: the iden3 binary container (:mod:`.binfile`) and
its .zkey, .wtns and .r1cs files; input.json, proof.json, public.json and
verification_key.json (:mod:`.circom_input`, :mod:`.jsonio`, :mod:`.proof_json`)."""
