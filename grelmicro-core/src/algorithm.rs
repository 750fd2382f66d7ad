//! The closed set of JWS algorithms this verifier knows.
//!
//! There is no `none` variant: an unsecured token cannot even be named.
//! Names are matched case-sensitively, as RFC 7515 §4.1.1 requires.

use aws_lc_rs::signature::{self, VerificationAlgorithm};

use crate::digest::Sha2;
use crate::error::{Detail, Error, ErrorKind, RefusedBy, Result};

/// A JWS signature algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    HS256,
    HS384,
    HS512,
    RS256,
    RS384,
    RS512,
    PS256,
    PS384,
    PS512,
    ES256,
    ES384,
    ES512,
    ES256K,
    /// `EdDSA` restricted to Ed25519 keys (RFC 8037).
    EdDSA,
    /// The fully-specified name of Ed25519 (RFC 9864).
    Ed25519,
    /// ML-DSA (FIPS 204) parameter sets, in JOSE per RFC 9964. Opt-in: never
    /// allowed unless named (see [`Algorithm::opt_in`]).
    MlDsa44,
    MlDsa65,
    MlDsa87,
}

/// The kind of key an algorithm needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    Hmac,
    RsaPkcs1,
    RsaPss,
    Ecdsa,
    Ed25519,
    /// ML-DSA, post-quantum (RFC 9964): `AKP` keys.
    MlDsa,
}

impl Algorithm {
    /// The names of the algorithms for which `allows` holds, in the order of
    /// [`Algorithm::ALL`] (what a verifier reports as its `algorithms`).
    pub fn names_where(allows: impl Fn(Algorithm) -> bool) -> Vec<&'static str> {
        Algorithm::ALL
            .into_iter()
            .filter(|a| allows(*a))
            .map(Algorithm::name)
            .collect()
    }

    /// Every algorithm, in a stable order.
    pub const ALL: [Algorithm; 18] = [
        Algorithm::HS256,
        Algorithm::HS384,
        Algorithm::HS512,
        Algorithm::RS256,
        Algorithm::RS384,
        Algorithm::RS512,
        Algorithm::PS256,
        Algorithm::PS384,
        Algorithm::PS512,
        Algorithm::ES256,
        Algorithm::ES384,
        Algorithm::ES512,
        Algorithm::ES256K,
        Algorithm::EdDSA,
        Algorithm::Ed25519,
        Algorithm::MlDsa44,
        Algorithm::MlDsa65,
        Algorithm::MlDsa87,
    ];

    /// Parses a header or configuration name (exact, case-sensitive).
    pub fn from_name(name: &[u8]) -> Option<Algorithm> {
        Some(match name {
            b"HS256" => Algorithm::HS256,
            b"HS384" => Algorithm::HS384,
            b"HS512" => Algorithm::HS512,
            b"RS256" => Algorithm::RS256,
            b"RS384" => Algorithm::RS384,
            b"RS512" => Algorithm::RS512,
            b"PS256" => Algorithm::PS256,
            b"PS384" => Algorithm::PS384,
            b"PS512" => Algorithm::PS512,
            b"ES256" => Algorithm::ES256,
            b"ES384" => Algorithm::ES384,
            b"ES512" => Algorithm::ES512,
            b"ES256K" => Algorithm::ES256K,
            b"EdDSA" => Algorithm::EdDSA,
            b"Ed25519" => Algorithm::Ed25519,
            b"ML-DSA-44" => Algorithm::MlDsa44,
            b"ML-DSA-65" => Algorithm::MlDsa65,
            b"ML-DSA-87" => Algorithm::MlDsa87,
            _ => return None,
        })
    }

    /// Parses a configured name, refusing unknown ones with a clear error.
    pub fn parse_config(name: &str) -> Result<Algorithm> {
        // The given name is not echoed: a secret passed in its place by
        // mistake must not end up in a message or a log.
        Algorithm::from_name(name.as_bytes()).ok_or(Error::new(
            ErrorKind::InvalidConfig,
            "unknown or unsupported algorithm (expected HS256/384/512, RS256/384/512, \
             PS256/384/512, ES256/384/512, ES256K, EdDSA, Ed25519 or ML-DSA-44/65/87)",
        ))
    }

    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::HS256 => "HS256",
            Algorithm::HS384 => "HS384",
            Algorithm::HS512 => "HS512",
            Algorithm::RS256 => "RS256",
            Algorithm::RS384 => "RS384",
            Algorithm::RS512 => "RS512",
            Algorithm::PS256 => "PS256",
            Algorithm::PS384 => "PS384",
            Algorithm::PS512 => "PS512",
            Algorithm::ES256 => "ES256",
            Algorithm::ES384 => "ES384",
            Algorithm::ES512 => "ES512",
            Algorithm::ES256K => "ES256K",
            Algorithm::EdDSA => "EdDSA",
            Algorithm::Ed25519 => "Ed25519",
            Algorithm::MlDsa44 => "ML-DSA-44",
            Algorithm::MlDsa65 => "ML-DSA-65",
            Algorithm::MlDsa87 => "ML-DSA-87",
        }
    }

    pub const fn family(self) -> Family {
        match self {
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => Family::Hmac,
            Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512 => Family::RsaPkcs1,
            Algorithm::PS256 | Algorithm::PS384 | Algorithm::PS512 => Family::RsaPss,
            Algorithm::ES256 | Algorithm::ES384 | Algorithm::ES512 | Algorithm::ES256K => {
                Family::Ecdsa
            }
            Algorithm::EdDSA | Algorithm::Ed25519 => Family::Ed25519,
            Algorithm::MlDsa44 | Algorithm::MlDsa65 | Algorithm::MlDsa87 => Family::MlDsa,
        }
    }

    /// Whether the algorithm is allowed only when named in an allow-list:
    /// the ML-DSA (post-quantum) ones. A verifier or DPoP checker left to its
    /// default allows none of them, even with an `AKP` key configured.
    pub const fn opt_in(self) -> bool {
        matches!(self.family(), Family::MlDsa)
    }

    /// An `algorithm` refusal of a token under `self`, with its `refused_by`
    /// and `algorithm` context. `self` is a name of the closed set, so
    /// `message` may name it (never any other token value).
    #[cold]
    pub(crate) fn refused(self, by: RefusedBy, message: String) -> Error {
        Error::with(ErrorKind::Algorithm, message)
            .detail("refused_by", Detail::Text(by.as_str().to_owned()))
            .detail("algorithm", Detail::Text(self.name().to_owned()))
    }

    /// Whether a key bound to `self` verifies tokens whose header says `alg`.
    ///
    /// Only the two names of Ed25519 are interchangeable; every other
    /// algorithm matches itself alone.
    pub fn accepts(self, alg: Algorithm) -> bool {
        self == alg || (self.family() == Family::Ed25519 && alg.family() == Family::Ed25519)
    }

    /// Minimum HMAC secret length in bytes (the hash output, RFC 7518 §3.2).
    pub const fn hmac_min_secret(self) -> usize {
        match self {
            Algorithm::HS384 => 48,
            Algorithm::HS512 => 64,
            _ => 32,
        }
    }

    /// The hash an HMAC algorithm runs (`None` for the others).
    pub(crate) fn hmac_hash(self) -> Option<Sha2> {
        match self {
            Algorithm::HS256 => Some(Sha2::Sha256),
            Algorithm::HS384 => Some(Sha2::Sha384),
            Algorithm::HS512 => Some(Sha2::Sha512),
            _ => None,
        }
    }

    /// The aws-lc-rs verification algorithm (ECDSA in fixed-width r‖s form).
    pub(crate) fn verification(self) -> Option<&'static dyn VerificationAlgorithm> {
        Some(match self {
            Algorithm::RS256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            Algorithm::RS384 => &signature::RSA_PKCS1_2048_8192_SHA384,
            Algorithm::RS512 => &signature::RSA_PKCS1_2048_8192_SHA512,
            Algorithm::PS256 => &signature::RSA_PSS_2048_8192_SHA256,
            Algorithm::PS384 => &signature::RSA_PSS_2048_8192_SHA384,
            Algorithm::PS512 => &signature::RSA_PSS_2048_8192_SHA512,
            Algorithm::ES256 => &signature::ECDSA_P256_SHA256_FIXED,
            Algorithm::ES384 => &signature::ECDSA_P384_SHA384_FIXED,
            Algorithm::ES512 => &signature::ECDSA_P521_SHA512_FIXED,
            Algorithm::ES256K => &signature::ECDSA_P256K1_SHA256_FIXED,
            Algorithm::EdDSA | Algorithm::Ed25519 => &signature::ED25519,
            Algorithm::MlDsa44 => &signature::ML_DSA_44,
            Algorithm::MlDsa65 => &signature::ML_DSA_65,
            Algorithm::MlDsa87 => &signature::ML_DSA_87,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => return None,
        })
    }

    /// The exact signature length for ECDSA (r‖s), Ed25519 and ML-DSA
    /// (FIPS 204 Table 2); `None` otherwise.
    pub const fn fixed_signature_len(self) -> Option<usize> {
        match self {
            Algorithm::ES256 | Algorithm::ES256K => Some(64),
            Algorithm::ES384 => Some(96),
            Algorithm::ES512 => Some(132),
            Algorithm::EdDSA | Algorithm::Ed25519 => Some(64),
            Algorithm::MlDsa44 => Some(2420),
            Algorithm::MlDsa65 => Some(3309),
            Algorithm::MlDsa87 => Some(4627),
            _ => None,
        }
    }

    /// The exact raw public key length of an ML-DSA parameter set (FIPS 204
    /// Table 2); `None` for the other algorithms.
    pub const fn mldsa_public_key_len(self) -> Option<usize> {
        match self {
            Algorithm::MlDsa44 => Some(1312),
            Algorithm::MlDsa65 => Some(1952),
            Algorithm::MlDsa87 => Some(2592),
            _ => None,
        }
    }

    /// The length of the unpadded base64url text of a fixed-length
    /// signature: what the signature segment must measure before decoding.
    pub const fn fixed_signature_text_len(self) -> Option<usize> {
        match self.fixed_signature_len() {
            Some(bytes) => Some((bytes * 4).div_ceil(3)),
            None => None,
        }
    }
}

/// A set of algorithms (an allow-list, or what a key set serves).
///
/// Each algorithm owns the bit of its own discriminant, so two algorithms
/// never share a bit and a set can only be built from [`Algorithm`] values:
/// no name or index can land on another algorithm's bit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AlgorithmSet(u32);

// Every discriminant must fit in the bits of the set.
const _: () = assert!(Algorithm::ALL.len() <= u32::BITS as usize);

impl AlgorithmSet {
    /// The empty set.
    pub const EMPTY: AlgorithmSet = AlgorithmSet(0);

    const fn bit(alg: Algorithm) -> u32 {
        1 << alg as u32
    }

    /// The set holding `alg` alone.
    pub const fn of(alg: Algorithm) -> AlgorithmSet {
        AlgorithmSet(AlgorithmSet::bit(alg))
    }

    /// Every algorithm a key bound to `alg` verifies (see [`Algorithm::accepts`]).
    pub fn accepted_by(alg: Algorithm) -> AlgorithmSet {
        Algorithm::ALL
            .into_iter()
            .filter(|a| alg.accepts(*a))
            .collect()
    }

    /// Parses configured names, refusing unknown ones (see [`Algorithm::parse_config`]).
    pub fn parse_config(names: &[String]) -> Result<AlgorithmSet> {
        names
            .iter()
            .map(|name| Algorithm::parse_config(name))
            .collect()
    }

    pub fn insert(&mut self, alg: Algorithm) {
        self.0 |= AlgorithmSet::bit(alg);
    }

    pub const fn contains(self, alg: Algorithm) -> bool {
        self.0 & AlgorithmSet::bit(alg) != 0
    }

    #[must_use]
    pub const fn union(self, other: AlgorithmSet) -> AlgorithmSet {
        AlgorithmSet(self.0 | other.0)
    }

    /// The set without its opt-in (ML-DSA) members: what a default
    /// allow-list, built from the keys, may hold.
    #[must_use]
    pub fn without_opt_in(self) -> AlgorithmSet {
        self.iter().filter(|a| !a.opt_in()).collect()
    }

    #[must_use]
    pub const fn intersection(self, other: AlgorithmSet) -> AlgorithmSet {
        AlgorithmSet(self.0 & other.0)
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members, in the order of [`Algorithm::ALL`].
    pub fn iter(self) -> impl Iterator<Item = Algorithm> {
        Algorithm::ALL
            .into_iter()
            .filter(move |a| self.contains(*a))
    }
}

impl FromIterator<Algorithm> for AlgorithmSet {
    fn from_iter<I: IntoIterator<Item = Algorithm>>(iter: I) -> AlgorithmSet {
        let mut set = AlgorithmSet::EMPTY;
        for alg in iter {
            set.insert(alg);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for alg in Algorithm::ALL {
            assert_eq!(Algorithm::from_name(alg.name().as_bytes()), Some(alg));
            let lower = alg.name().to_ascii_lowercase();
            if lower != alg.name() {
                assert_eq!(Algorithm::from_name(lower.as_bytes()), None);
            }
        }
    }

    #[test]
    fn none_is_not_an_algorithm() {
        for name in ["none", "None", "NONE", "nOnE", ""] {
            assert_eq!(Algorithm::from_name(name.as_bytes()), None);
        }
        assert!(Algorithm::parse_config("none").is_err());
    }

    #[test]
    fn only_ed25519_names_are_interchangeable() {
        assert!(Algorithm::EdDSA.accepts(Algorithm::Ed25519));
        assert!(Algorithm::Ed25519.accepts(Algorithm::EdDSA));
        assert!(!Algorithm::RS256.accepts(Algorithm::PS256));
        assert!(!Algorithm::ES256.accepts(Algorithm::ES256K));
        assert!(!Algorithm::HS256.accepts(Algorithm::HS512));
    }

    #[test]
    fn a_refusal_says_who_refused_which_algorithm() {
        let err = Algorithm::PS384.refused(RefusedBy::Keys, "no key".into());
        assert_eq!(err.kind(), ErrorKind::Algorithm);
        assert_eq!(err.message(), "no key");
        assert_eq!(
            err.context(),
            &[
                ("refused_by", Detail::Text("keys".into())),
                ("algorithm", Detail::Text("PS384".into())),
            ]
        );
    }

    #[test]
    fn hmac_minimum_is_hash_output() {
        assert_eq!(Algorithm::HS256.hmac_min_secret(), 32);
        assert_eq!(Algorithm::HS384.hmac_min_secret(), 48);
        assert_eq!(Algorithm::HS512.hmac_min_secret(), 64);
    }

    #[test]
    fn every_algorithm_has_its_own_bit() {
        for a in Algorithm::ALL {
            let set = AlgorithmSet::of(a);
            for b in Algorithm::ALL {
                assert_eq!(set.contains(b), a == b, "{} vs {}", a.name(), b.name());
            }
            assert_eq!(set.iter().collect::<Vec<_>>(), vec![a]);
        }
        let all: AlgorithmSet = Algorithm::ALL.into_iter().collect();
        assert_eq!(all.iter().count(), Algorithm::ALL.len());
        assert!(AlgorithmSet::EMPTY.is_empty());
    }

    #[test]
    fn unknown_names_never_join_a_set() {
        // An unknown name is an error, never some other algorithm's member.
        for name in ["none", "hs256", "HS257", "", "RS1"] {
            let err = AlgorithmSet::parse_config(&[name.to_owned()]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidConfig);
        }
        let set = AlgorithmSet::parse_config(&["ES256".to_owned(), "PS384".to_owned()]).unwrap();
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            vec![Algorithm::PS384, Algorithm::ES256]
        );
        assert!(!set.contains(Algorithm::HS256));
    }

    #[test]
    fn ed25519_keys_accept_both_names() {
        let set = AlgorithmSet::accepted_by(Algorithm::EdDSA);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            vec![Algorithm::EdDSA, Algorithm::Ed25519]
        );
        assert_eq!(
            AlgorithmSet::accepted_by(Algorithm::RS256),
            AlgorithmSet::of(Algorithm::RS256)
        );
    }
}
