//! # grelmicro-core
//!
//! The compiled verification core of `grelmicro[jwt]`.
//!
//! It parses compact JWS tokens strictly, picks a key by `kid` and `alg`,
//! checks the signature with aws-lc-rs and the registered claims against a
//! `now` given by the caller, and decodes the payload in one pass. It never
//! reads the clock and never does I/O. Every object is built once and is
//! immutable afterwards; rotating keys means building new objects.
//!
//! Modules:
//! - [`token`]: segments and strict base64url
//! - [`header`]: the JOSE header (`alg`, `kid`, `typ`, `crit`, `b64`)
//! - [`algorithm`]: the closed algorithm set
//! - [`key`], [`keyset`]: keys bound to one algorithm, and key selection
//!   (a JWKS, or an object of `kid` to X.509 certificates: `certificates`)
//! - [`policy`], [`claims`]: what a token must satisfy beyond its signature
//! - [`json`]: strict JSON on top of jiter, into any [`json::Builder`]
//! - [`verifier`]: the pieces put together
//! - [`peek`]: the unverified issuer of a token, to route it among issuers
//! - [`digest`]: SHA-256 for the cache key, the SHA-2 names HMAC runs
//! - [`cache`]: the verified-token cache, shared by every thread
//! - [`dpop`]: DPoP proofs (RFC 9449), the sender constraint on a token
//! - [`error`]: one error type with stable kinds
//! - `python` (feature `python`): all pyo3 glue

pub mod algorithm;
pub mod cache;
mod certificates;
pub mod claims;
mod der;
pub mod digest;
pub mod dpop;
pub mod error;
pub mod header;
pub mod json;
pub mod key;
pub mod keyset;
pub mod peek;
pub mod policy;
pub mod token;
pub mod verifier;

#[cfg(feature = "python")]
mod python;

pub use algorithm::Algorithm;
pub use error::{Error, ErrorKind, Result};
pub use key::Key;
pub use keyset::KeySet;
pub use policy::{Policy, PolicyOptions};
pub use verifier::Verifier;

/// Hash of the sources this library was built from (see `build.rs`).
pub const SOURCE_HASH: &str = env!("GRELMICRO_CORE_SOURCE_HASH");

/// How this library was compiled with respect to profile-guided
/// optimisation: `"trained"` (built with a profile), `"instrumented"`
/// (collecting one) or `"off"` (see `build.rs`).
pub const PGO: &str = env!("GRELMICRO_CORE_PGO");
