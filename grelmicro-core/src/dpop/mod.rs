//! DPoP proofs (RFC 9449): the sender constraint on an access token.
//!
//! A proof is a compact JWS that carries its own public key in the `jwk`
//! header, so every proof is attacker-supplied key material. It is checked
//! like a token and more strictly: `typ` `dpop+jwt`, an asymmetric algorithm
//! from the allow-list (never HMAC, never `none`), a public `jwk` parsed by
//! the same rules as a configured key ([`Key::jwk`]: key sizes, curves,
//! small-order Ed25519 points, no private members, no `oct`), then the
//! binding: the RFC 7638 thumbprint of the proof key must equal the access
//! token's `cnf.jkt` (checked before the signature, so a proof by any other
//! key costs a hash to refuse, whatever key size it names), then the
//! signature with that key, `htm`, `htu` (RFC 9449 §4.3 normalisation), the
//! `iat` window (leeway both ways) and `ath` (SHA-256 of the access token).
//!
//! One call checks one proof; the clock is the caller's `now`, and nothing
//! here does I/O. Replay (`jti` seen before) and server nonces are the
//! Python layer's: they need state. The call hands back what they need: a
//! 32-byte replay key (SHA-256 over the thumbprint and the `jti`, so the
//! store never keeps proof text and entries have one size), `iat`, `nonce`.
//!
//! Refusals are a [`Refusal`]: which check failed plus a core [`Error`]
//! whose message never quotes the proof, the token or key material.

use crate::algorithm::{Algorithm, AlgorithmSet, Family};
use crate::error::{Detail, Error, ErrorKind, Result};
use crate::policy::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_TOKEN_SIZE};

mod htu;
mod proof;
#[cfg(test)]
mod tests;
mod thumbprint;

pub use htu::normalize_htu;
pub use thumbprint::thumbprint;

/// Default acceptance window of a proof after its `iat` (seconds).
pub const DEFAULT_MAX_AGE: f64 = 60.0;
/// Default clock leeway, applied on both sides of the window (seconds).
pub const DEFAULT_LEEWAY: f64 = 5.0;
/// Longest `jti` accepted (bytes).
pub const MAX_JTI: usize = 256;
/// Longest `htu` or request URI considered (bytes).
pub const MAX_URI: usize = 4096;

/// Which rule a proof broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// Size, segments, base64url, JSON shape.
    Structure,
    /// `typ` is not `dpop+jwt`.
    Type,
    /// `alg` missing, unknown, symmetric or not allowed.
    Algorithm,
    /// The `jwk` header is missing or not an acceptable public key.
    Key,
    /// The signature does not verify with the header's key.
    Signature,
    /// `jti` missing, not a string, empty or too long.
    Jti,
    /// `htm` is not the request method.
    Method,
    /// `htu` is not the request URI.
    Uri,
    /// `iat` missing, not a number, or outside the window.
    IssuedAt,
    /// `ath` is not the hash of the access token.
    AccessTokenHash,
    /// `nonce` present but not a string.
    Nonce,
    /// The proof key is not the key the access token is bound to.
    Binding,
}

impl Check {
    /// Stable name of the check (Python's `DPoPError.check`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Check::Structure => "structure",
            Check::Type => "typ",
            Check::Algorithm => "alg",
            Check::Key => "jwk",
            Check::Signature => "signature",
            Check::Jti => "jti",
            Check::Method => "htm",
            Check::Uri => "htu",
            Check::IssuedAt => "iat",
            Check::AccessTokenHash => "ath",
            Check::Nonce => "nonce",
            Check::Binding => "jkt",
        }
    }
}

/// A refused proof: the rule it broke and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub check: Check,
    pub error: Error,
}

impl Refusal {
    fn new(check: Check, kind: ErrorKind, message: &'static str) -> Refusal {
        Refusal {
            check,
            error: Error::new(kind, message),
        }
    }

    /// A refusal with a built message (never quoting the proof).
    fn with(check: Check, kind: ErrorKind, message: String) -> Refusal {
        Refusal {
            check,
            error: Error::with(kind, message),
        }
    }

    fn from(check: Check, error: Error) -> Refusal {
        Refusal { check, error }
    }

    /// The error kind it crosses into Python with (`dpop-proof` or `dpop-binding`).
    pub const fn kind(&self) -> ErrorKind {
        match self.check {
            Check::Binding => ErrorKind::DpopBinding,
            _ => ErrorKind::DpopProof,
        }
    }

    pub fn message(&self) -> &str {
        self.error.message()
    }
}

/// A refusal crosses as its DPoP kind with the broken rule as the `check`
/// context (the inner error's own context stays behind).
impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Error {
        let kind = refusal.kind();
        refusal
            .error
            .rekind(kind)
            .detail("check", Detail::Text(refusal.check.as_str().to_owned()))
    }
}

/// What an accepted proof hands back for replay and nonce checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Accepted {
    /// SHA-256 over the key thumbprint, a zero byte and the `jti`.
    pub replay_key: [u8; 32],
    pub iat: f64,
    pub nonce: Option<String>,
    pub algorithm: Algorithm,
}

/// Everything a proof policy is built from.
#[derive(Clone, Debug)]
pub struct ProofOptions {
    /// `None`: every asymmetric algorithm.
    pub algorithms: Option<Vec<String>>,
    pub max_age: f64,
    pub leeway: f64,
    pub max_size: usize,
    pub max_depth: usize,
}

impl Default for ProofOptions {
    fn default() -> Self {
        ProofOptions {
            algorithms: None,
            max_age: DEFAULT_MAX_AGE,
            leeway: DEFAULT_LEEWAY,
            max_size: DEFAULT_MAX_TOKEN_SIZE,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// The rules a proof is checked against; built once, immutable.
#[derive(Clone, Debug)]
pub struct ProofVerifier {
    allowed: AlgorithmSet,
    max_age: f64,
    leeway: f64,
    max_size: usize,
    max_depth: usize,
}

fn config(message: &'static str) -> Error {
    Error::new(ErrorKind::InvalidConfig, message)
}

impl ProofVerifier {
    pub fn new(options: ProofOptions) -> Result<ProofVerifier> {
        let allowed = match &options.algorithms {
            // ML-DSA (opt-in) proofs are allowed only when named.
            None => Algorithm::ALL
                .into_iter()
                .filter(|a| a.family() != Family::Hmac && !a.opt_in())
                .collect(),
            Some(names) => {
                let mut set = AlgorithmSet::EMPTY;
                for name in names {
                    let alg = Algorithm::parse_config(name)?;
                    if alg.family() == Family::Hmac {
                        return Err(config(
                            "DPoP proofs are signed with a public-key algorithm; \
                             HS256/HS384/HS512 cannot be allowed",
                        ));
                    }
                    set.insert(alg);
                }
                set
            }
        };
        if allowed.is_empty() {
            return Err(config("no algorithm is allowed for DPoP proofs"));
        }
        if !(options.max_age.is_finite() && options.max_age > 0.0) {
            return Err(config("the DPoP proof max_age must be a positive number"));
        }
        if !(options.leeway.is_finite() && options.leeway >= 0.0) {
            return Err(config("the DPoP proof leeway must be 0 or more"));
        }
        if options.max_size == 0 || options.max_depth == 0 {
            return Err(config(
                "the DPoP proof size and depth limits must be positive",
            ));
        }
        Ok(ProofVerifier {
            allowed,
            max_age: options.max_age,
            leeway: options.leeway,
            max_size: options.max_size,
            max_depth: options.max_depth,
        })
    }

    /// Whether proofs signed with `alg` are accepted.
    pub fn allows(&self, alg: Algorithm) -> bool {
        self.allowed.contains(alg)
    }

    pub fn max_age(&self) -> f64 {
        self.max_age
    }

    pub fn leeway(&self) -> f64 {
        self.leeway
    }
}
