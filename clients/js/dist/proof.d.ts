import type { Checkpoint, OrderProof } from "./endpoints.js";
export type ProofErrorCode = "bad_signature" | "wrong_key" | "not_included" | "inconsistent" | "malformed" | "no_checkpoint";
export declare class ProofError extends Error {
    readonly code: ProofErrorCode;
    constructor(code: ProofErrorCode, message: string);
}
export interface ProofOptions {
    /** The server's checkpoint key (base64), kept outside orderd: a proof
     * signed by any other key is refused. */
    publicKey: string;
}
/** verifyCheckpoint checks a checkpoint's Ed25519 signature with the key
 * the caller trusts. */
export declare function verifyCheckpoint(cp: Checkpoint, options: ProofOptions): Promise<void>;
/** verifyProof checks an order's receipt: the checkpoint's signature with
 * the trusted key, then every event's audit path from its leaf
 * (sha256(0x00 || hash)) to the checkpoint's root (RFC 6962 §2.1.1). It
 * returns the checkpoint, which the caller may keep to check later
 * checkpoints against with verifyConsistency. */
export declare function verifyProof(proof: OrderProof, options: ProofOptions): Promise<Checkpoint>;
/** verifyConsistency checks that the tree of newer extends the tree of
 * older (RFC 6962 §2.1.2): nothing in older was changed, removed or
 * reordered. Both checkpoints must verify with the trusted key. */
export declare function verifyConsistency(older: Checkpoint, newer: Checkpoint, proof: string[], options: ProofOptions): Promise<void>;
