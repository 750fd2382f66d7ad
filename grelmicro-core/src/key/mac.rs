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
//! compares every tag with `aws_lc_rs::hmac` and checks RFC 4231's cases;
//! the Wycheproof HMAC vectors reach this module through
//! [`super::Key::verify`].
//!
//! What the types keep true:
//!
//! - A state after a padded key is as good as the secret: whoever holds a
//!   copy can make tags. So a [`State`] is neither `Copy` nor `Clone`, and
//!   it wipes itself when dropped (its `Drop` also keeps `derive(Copy)` from
//!   compiling). The one way to duplicate a state is [`State::fork`], which
//!   `sign_into` calls for its two working copies; they are wiped when they
//!   go out of scope. (Bytes the compiler leaves behind when it moves a
//!   value are out of reach of any Rust type.)
//! - A state is of one hash (one variant each), so it is always finished by
//!   its own function: there is no second `Sha2` to keep in step with it.
//! - One copy of aws-lc: `aws-lc-sys` here must be the version aws-lc-rs
//!   links (Cargo.toml), or the process carries two aws-lc builds and this
//!   module hashes with the other one. `nox -s rust` fails when
//!   `cargo tree` finds two.
//!
//! FIPS: this module calls aws-lc's SHA-2 functions directly, outside the
//! FIPS module's service boundary and its approved-service indicator. A
//! build that must run as FIPS 140-3 validated (aws-lc-rs's `fips` feature,
//! `aws-lc-fips-sys`) has to verify HMAC with `aws_lc_rs::hmac` instead of
//! this module (and drop the `aws-lc-sys` dependency, a second aws-lc).
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

/// A SHA-2 state part-way through a message, one variant per hash.
/// Not `Copy` or `Clone` (see the module notes): [`State::fork`] is the
/// one way to duplicate it, and it is wiped when dropped.
enum State {
    Sha256(sys::SHA256_CTX),
    /// SHA-384 runs on SHA-512's state with its own initial values.
    Sha384(sys::SHA512_CTX),
    Sha512(sys::SHA512_CTX),
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
                    State::Sha256(ctx)
                }
                Sha2::Sha384 => {
                    let mut ctx = std::mem::zeroed::<sys::SHA512_CTX>();
                    sys::SHA384_Init(&raw mut ctx);
                    State::Sha384(ctx)
                }
                Sha2::Sha512 => {
                    let mut ctx = std::mem::zeroed::<sys::SHA512_CTX>();
                    sys::SHA512_Init(&raw mut ctx);
                    State::Sha512(ctx)
                }
            }
        }
    }

    /// A copy to go on from, leaving this state as it is.
    fn fork(&self) -> State {
        match self {
            State::Sha256(ctx) => State::Sha256(*ctx),
            State::Sha384(ctx) => State::Sha384(*ctx),
            State::Sha512(ctx) => State::Sha512(*ctx),
        }
    }

    fn update(&mut self, data: &[u8]) {
        // SAFETY: `data` is valid for `data.len()` bytes; the state is ours.
        // SHA-384 shares SHA-512's update function.
        unsafe {
            match self {
                State::Sha256(ctx) => sys::SHA256_Update(ctx, data.as_ptr().cast(), data.len()),
                State::Sha384(ctx) | State::Sha512(ctx) => {
                    sys::SHA512_Update(ctx, data.as_ptr().cast(), data.len())
                }
            };
        }
    }

    /// Writes the digest to the start of `out` and returns its length.
    /// (Taking `self` by value, to use the state up, moved it on every
    /// call: measured ~15 ns more per HS256 tag.)
    fn finish(&mut self, out: &mut [u8; MAX_DIGEST]) -> usize {
        let to = out.as_mut_ptr();
        // SAFETY: `out` has room for the largest digest; each `*_Final`
        // writes its own hash's digest length from a state of that hash.
        unsafe {
            match self {
                State::Sha256(ctx) => {
                    sys::SHA256_Final(to, ctx);
                    Sha2::Sha256.digest_len()
                }
                State::Sha384(ctx) => {
                    sys::SHA384_Final(to, ctx);
                    Sha2::Sha384.digest_len()
                }
                State::Sha512(ctx) => {
                    sys::SHA512_Final(to, ctx);
                    Sha2::Sha512.digest_len()
                }
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let (pointer, length) = match self {
            State::Sha256(ctx) => (
                std::ptr::from_mut(ctx).cast(),
                std::mem::size_of::<sys::SHA256_CTX>(),
            ),
            State::Sha384(ctx) | State::Sha512(ctx) => (
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
    state.finish(&mut out);
    out
}

/// An HMAC key: the hash states after the inner and the outer padded key
/// (each wiped when the key is dropped).
pub(crate) struct MacKey {
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
        MacKey { inner, outer }
    }

    /// Writes the HMAC of `message` to the start of `out`; returns its length.
    fn sign_into(&self, message: &[u8], out: &mut [u8; MAX_DIGEST]) -> usize {
        let mut inner = self.inner.fork();
        inner.update(message);
        let length = inner.finish(out);
        let mut outer = self.outer.fork();
        outer.update(&out[..length]);
        outer.finish(out)
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

    /// RFC 4231 section 4, test cases 1 to 7 (keys shorter than, equal to
    /// and longer than a block; case 5's output is truncated to 128 bits in
    /// the RFC, so its prefix is compared). Each row: key, message, then
    /// HMAC-SHA-256, -384 and -512 in hex.
    #[test]
    fn rfc4231_test_cases() {
        let long_key = [0xaa; 131];
        let four: Vec<u8> = (1..=25).collect();
        let cases: [(&[u8], &[u8], [&str; 3]); 7] = [
            (
                &[0x0b; 20],
                b"Hi There",
                [
                    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
                    "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c\
                     faea9ea9076ede7f4af152e8b2fa9cb6",
                    "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde\
                     daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
                ],
            ),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                [
                    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
                    "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e\
                     8e2240ca5e69e2c78b3239ecfab21649",
                    "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
                     9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
                ],
            ),
            (
                &[0xaa; 20],
                &[0xdd; 50],
                [
                    "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
                    "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b\
                     2a5ab39dc13814b94e3ab6e101a34f27",
                    "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39\
                     bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb",
                ],
            ),
            (
                &four,
                &[0xcd; 50],
                [
                    "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
                    "3e8a69b7783c25851933ab6290af6ca77a9981480850009cc5577c6e1f573b4e\
                     6801dd23c4a7d679ccf8a386c674cffb",
                    "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3db\
                     a91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd",
                ],
            ),
            (
                &[0x0c; 20],
                b"Test With Truncation",
                [
                    "a3b6167473100ee06e0c796c2955552b",
                    "3abf34c3503b2a23a46efc619baef897",
                    "415fad6271580a531d4179bc891d87a6",
                ],
            ),
            (
                &long_key,
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                [
                    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
                    "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6\
                     0c2ef6ab4030fe8296248df163f44952",
                    "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352\
                     6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
                ],
            ),
            (
                &long_key,
                b"This is a test using a larger than block-size key and a larger \
                  than block-size data. The key needs to be hashed before being \
                  used by the HMAC algorithm.",
                [
                    "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
                    "6617178e941f020d351e2f254e8fd32c602420feb0b8fb9adccebb82461e99c5\
                     a678cc31e799176d3860e6110c46523e",
                    "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944\
                     b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58",
                ],
            ),
        ];
        for (number, (secret, message, expected)) in (1..).zip(cases) {
            for ((hash, _), expected) in HASHES.into_iter().zip(expected) {
                let key = MacKey::new(hash, secret);
                let tag = to_hex(&key.sign(message));
                assert_eq!(tag.len(), 2 * hash.digest_len(), "case {number} {hash:?}");
                assert!(tag.starts_with(expected), "case {number} {hash:?}");
                if expected.len() == tag.len() {
                    let raw: Vec<u8> = (0..expected.len() / 2)
                        .map(|i| u8::from_str_radix(&expected[2 * i..2 * i + 2], 16).unwrap())
                        .collect();
                    assert!(key.verify(message, &raw), "case {number} {hash:?}");
                } else {
                    assert_eq!(number, 5, "only case 5 is truncated");
                }
            }
        }
    }

    /// A measurement, not a check of speed: the prepared states against
    /// `aws_lc_rs::hmac::verify` with the same key and message, interleaved
    /// round by round, fastest and median round printed. Run by hand:
    /// `cargo test --release --no-default-features --lib speed_against -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement, run by hand"]
    fn speed_against_aws_lc_rs() {
        use std::hint::black_box;
        use std::time::Instant;
        const CALLS: u32 = 20_000;
        const ROUNDS: usize = 31;
        let per_call = |rounds: &mut Vec<f64>| {
            rounds.sort_by(f64::total_cmp);
            (rounds[0], rounds[rounds.len() / 2])
        };
        for (hash, reference) in HASHES {
            for length in [300, 1000] {
                let secret = bytes(hash.digest_len(), 5);
                let message = bytes(length, 1);
                let ours = MacKey::new(hash, &secret);
                let theirs = hmac::Key::new(reference, &secret);
                let tag = hmac::sign(&theirs, &message);
                assert!(ours.verify(&message, tag.as_ref()));
                assert!(hmac::verify(&theirs, &message, tag.as_ref()).is_ok());
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for round in 0..ROUNDS {
                    for side in [round % 2, 1 - round % 2] {
                        let start = Instant::now();
                        for _ in 0..CALLS {
                            let ok = if side == 0 {
                                ours.verify(black_box(&message), black_box(tag.as_ref()))
                            } else {
                                hmac::verify(&theirs, black_box(&message), black_box(tag.as_ref()))
                                    .is_ok()
                            };
                            black_box(ok);
                        }
                        let ns = start.elapsed().as_nanos() as f64 / f64::from(CALLS);
                        if side == 0 { &mut a } else { &mut b }.push(ns);
                    }
                }
                let ((a_min, a_median), (b_min, b_median)) = (per_call(&mut a), per_call(&mut b));
                println!(
                    "{hash:?} {length:>4} B: prepared {a_min:.0}/{a_median:.0} ns, \
                     aws-lc-rs hmac::verify {b_min:.0}/{b_median:.0} ns (fastest/median), \
                     ratio {:.2}/{:.2}",
                    a_min / b_min,
                    a_median / b_median
                );
            }
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
