//! HMAC-SHA-2 (RFC 2104), with the key's part of the work done once.
//!
//! HMAC is `H((K ^ opad) || H((K ^ ipad) || message))`. Both padded key
//! blocks are fixed for the key's life, so [`MacKey::new`] runs SHA-2 over
//! each of them once and keeps the two partial states. Checking a tag
//! starts from copies of those states: one more SHA-2 over the message, one
//! over the inner digest, and a constant-time comparison.
//!
//! `aws_lc_rs::hmac::verify` instead initialises an `HMAC_CTX`, copies the
//! key's context into it and cleans it up again for every tag; on a token
//! of a few hundred bytes that measured as a sizeable part of the HS256
//! path (docs/design-notes.md, "HMAC from prepared states"). The SHA-2 code
//! is still aws-lc's (SHA-NI where the CPU has it), called through
//! `aws-lc-sys`, the crate `aws-lc-rs` itself is built on. `tests` below
//! compares every tag with `aws_lc_rs::hmac`; the Wycheproof HMAC vectors
//! reach this module through [`super::Key::verify`].
//!
//! The crate denies `unsafe_code`; this module and `python/raw.rs` are the
//! only places that allow it. Each unsafe block calls an aws-lc SHA-2
//! function on a state this module owns, with the buffer lengths it passes.
#![allow(unsafe_code)]

use aws_lc_rs::constant_time;
use aws_lc_sys as sys;

use crate::digest::Sha2;

/// The largest digest (SHA-512).
const MAX_DIGEST: usize = 64;
/// The largest block (SHA-384 and SHA-512).
const MAX_BLOCK: usize = 128;

const IPAD: u8 = 0x36;
const OPAD: u8 = 0x5c;

/// A SHA-2 state part-way through a message.
#[derive(Clone, Copy)]
enum State {
    Small(sys::SHA256_CTX),
    Large(sys::SHA512_CTX),
}

impl State {
    fn new(hash: Sha2) -> State {
        // SAFETY: the states are plain structs that the `*_Init` functions
        // fill in completely; they cannot fail.
        unsafe {
            match hash {
                Sha2::Sha256 => {
                    let mut ctx = std::mem::zeroed::<sys::SHA256_CTX>();
                    sys::SHA256_Init(&raw mut ctx);
                    State::Small(ctx)
                }
                Sha2::Sha384 => {
                    let mut ctx = std::mem::zeroed::<sys::SHA512_CTX>();
                    sys::SHA384_Init(&raw mut ctx);
                    State::Large(ctx)
                }
                Sha2::Sha512 => {
                    let mut ctx = std::mem::zeroed::<sys::SHA512_CTX>();
                    sys::SHA512_Init(&raw mut ctx);
                    State::Large(ctx)
                }
            }
        }
    }

    fn update(&mut self, data: &[u8]) {
        // SAFETY: `data` is valid for `data.len()` bytes; the state is ours.
        // SHA-384 shares SHA-512's update function.
        unsafe {
            match self {
                State::Small(ctx) => sys::SHA256_Update(ctx, data.as_ptr().cast(), data.len()),
                State::Large(ctx) => sys::SHA512_Update(ctx, data.as_ptr().cast(), data.len()),
            };
        }
    }

    /// Writes the digest to the start of `out` (its length is `hash`'s).
    fn finish(&mut self, hash: Sha2, out: &mut [u8; MAX_DIGEST]) {
        // SAFETY: `out` has room for the largest digest; each `*_Final`
        // writes its own digest length, read from the state it was set up
        // with (`hash` is the one that built this state).
        unsafe {
            match (self, hash) {
                (State::Small(ctx), _) => sys::SHA256_Final(out.as_mut_ptr(), ctx),
                (State::Large(ctx), Sha2::Sha384) => sys::SHA384_Final(out.as_mut_ptr(), ctx),
                (State::Large(ctx), _) => sys::SHA512_Final(out.as_mut_ptr(), ctx),
            };
        }
    }

    fn wipe(&mut self) {
        let (pointer, length) = match self {
            State::Small(ctx) => (
                std::ptr::from_mut(ctx).cast(),
                std::mem::size_of::<sys::SHA256_CTX>(),
            ),
            State::Large(ctx) => (
                std::ptr::from_mut(ctx).cast(),
                std::mem::size_of::<sys::SHA512_CTX>(),
            ),
        };
        // SAFETY: overwrites exactly the state this value owns.
        unsafe { sys::OPENSSL_cleanse(pointer, length) }
    }
}

fn wipe_bytes(bytes: &mut [u8]) {
    // SAFETY: overwrites exactly the bytes of `bytes`.
    unsafe { sys::OPENSSL_cleanse(bytes.as_mut_ptr().cast(), bytes.len()) }
}

/// The hash of `data` (keys longer than a block are hashed first).
fn digest(hash: Sha2, data: &[u8]) -> [u8; MAX_DIGEST] {
    let mut state = State::new(hash);
    state.update(data);
    let mut out = [0; MAX_DIGEST];
    state.finish(hash, &mut out);
    state.wipe();
    out
}

/// An HMAC key: the hash states after the inner and the outer padded key.
pub(crate) struct MacKey {
    hash: Sha2,
    inner: State,
    outer: State,
}

impl MacKey {
    pub(crate) fn new(hash: Sha2, secret: &[u8]) -> MacKey {
        let block = hash.block_len();
        let mut padded = [0u8; MAX_BLOCK];
        if secret.len() > block {
            let mut hashed = digest(hash, secret);
            padded[..hash.digest_len()].copy_from_slice(&hashed[..hash.digest_len()]);
            wipe_bytes(&mut hashed);
        } else {
            padded[..secret.len()].copy_from_slice(secret);
        }
        let mut pad = [0u8; MAX_BLOCK];
        let mut keyed = |mask: u8| {
            for (out, byte) in pad.iter_mut().zip(&padded) {
                *out = byte ^ mask;
            }
            let mut state = State::new(hash);
            state.update(&pad[..block]);
            state
        };
        let inner = keyed(IPAD);
        let outer = keyed(OPAD);
        wipe_bytes(&mut pad);
        wipe_bytes(&mut padded);
        MacKey { hash, inner, outer }
    }

    /// Writes the HMAC of `message` to the start of `out`; returns its length.
    fn sign_into(&self, message: &[u8], out: &mut [u8; MAX_DIGEST]) -> usize {
        let length = self.hash.digest_len();
        let mut inner = self.inner;
        inner.update(message);
        inner.finish(self.hash, out);
        let mut outer = self.outer;
        outer.update(&out[..length]);
        outer.finish(self.hash, out);
        inner.wipe();
        outer.wipe();
        length
    }

    /// Whether `tag` is the HMAC of `message` (compared in constant time).
    pub(crate) fn verify(&self, message: &[u8], tag: &[u8]) -> bool {
        let mut out = [0u8; MAX_DIGEST];
        let length = self.sign_into(message, &mut out);
        let matches = constant_time::verify_slices_are_equal(&out[..length], tag).is_ok();
        wipe_bytes(&mut out);
        matches
    }

    /// The HMAC of `message` (tests compare it with `aws_lc_rs::hmac`).
    #[cfg(test)]
    pub(crate) fn sign(&self, message: &[u8]) -> Vec<u8> {
        let mut out = [0u8; MAX_DIGEST];
        let length = self.sign_into(message, &mut out);
        out[..length].to_vec()
    }
}

impl Drop for MacKey {
    fn drop(&mut self) {
        self.inner.wipe();
        self.outer.wipe();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::tests::to_hex;
    use aws_lc_rs::hmac;

    const HASHES: [(Sha2, hmac::Algorithm); 3] = [
        (Sha2::Sha256, hmac::HMAC_SHA256),
        (Sha2::Sha384, hmac::HMAC_SHA384),
        (Sha2::Sha512, hmac::HMAC_SHA512),
    ];

    fn bytes(length: usize, seed: u8) -> Vec<u8> {
        (0..length)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Keys shorter than, equal to and longer than a block (hashed first),
    /// messages around the block and padding boundaries: every tag equals
    /// aws-lc-rs's own HMAC, and every altered tag is refused.
    #[test]
    fn tags_match_aws_lc_rs() {
        for (hash, reference) in HASHES {
            let block = hash.block_len();
            for key_length in [1, 32, block - 1, block, block + 1, 2 * block + 3, 300] {
                let secret = bytes(key_length, 7);
                let ours = MacKey::new(hash, &secret);
                let theirs = hmac::Key::new(reference, &secret);
                for length in [0, 1, 55, 56, 63, 64, 65, 111, 112, 127, 128, 129, 491, 4096] {
                    let message = bytes(length, 3);
                    let tag = hmac::sign(&theirs, &message);
                    assert_eq!(
                        ours.sign(&message),
                        tag.as_ref(),
                        "{hash:?} {key_length} {length}"
                    );
                    assert!(ours.verify(&message, tag.as_ref()));
                    let mut flipped = tag.as_ref().to_vec();
                    let at = length % flipped.len();
                    flipped[at] ^= 1;
                    assert!(!ours.verify(&message, &flipped));
                    assert!(!ours.verify(&message, &tag.as_ref()[..tag.as_ref().len() - 1]));
                    assert!(!ours.verify(&message, &[tag.as_ref(), &[0]].concat()));
                    assert!(!ours.verify(&message, &[]));
                }
            }
        }
    }

    /// RFC 4231, test case 2 (a key shorter than the digest; the length
    /// rules are the key builder's, not this module's).
    #[test]
    fn rfc4231_test_case_2() {
        let message = b"what do ya want for nothing?";
        let expected = [
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e\
             8e2240ca5e69e2c78b3239ecfab21649",
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
             9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
        ];
        for ((hash, _), expected) in HASHES.into_iter().zip(expected) {
            assert_eq!(to_hex(&MacKey::new(hash, b"Jefe").sign(message)), expected);
        }
    }

    /// A key's prepared states are not changed by use: the same tag twice,
    /// from threads sharing the key.
    #[test]
    fn prepared_states_are_reused_unchanged() {
        let key = std::sync::Arc::new(MacKey::new(Sha2::Sha256, &[9; 32]));
        let first = key.sign(b"payload");
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let key = std::sync::Arc::clone(&key);
                std::thread::spawn(move || {
                    (0..1000).all(|_| key.verify(b"payload", &key.sign(b"payload")))
                })
            })
            .collect();
        assert!(handles.into_iter().all(|h| h.join().unwrap()));
        assert_eq!(key.sign(b"payload"), first);
    }
}
