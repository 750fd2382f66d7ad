//! The verifier: keys plus policy, built once, immutable.

use std::sync::Arc;

use crate::claims;
use crate::error::{Error, ErrorKind, Result};
use crate::header;
use crate::json::{Builder, Value, ValueBuilder};
use crate::keyset::{algorithm_bit, KeySet};
use crate::policy::Policy;
use crate::token;

/// Everything needed to check a token, fixed at construction.
#[derive(Debug)]
pub struct Verifier {
    keys: Arc<KeySet>,
    policy: Arc<Policy>,
    allowed: u32,
}

impl Verifier {
    pub fn new(keys: Arc<KeySet>, policy: Arc<Policy>) -> Result<Verifier> {
        let served = keys.algorithm_bits();
        let allowed = policy.algorithms.unwrap_or(served) & served;
        if allowed == 0 {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "no configured key serves any of the allowed algorithms",
            ));
        }
        Ok(Verifier {
            keys,
            policy,
            allowed,
        })
    }

    pub fn keys(&self) -> &KeySet {
        &self.keys
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether tokens under `alg` are accepted at all.
    pub fn allows(&self, alg: crate::Algorithm) -> bool {
        self.allowed & algorithm_bit(alg) != 0
    }

    /// Structure, header, key choice and signature: everything that needs no
    /// Python objects. Returns the decoded (now authenticated) payload bytes.
    pub fn authenticate(&self, token: &[u8]) -> Result<Vec<u8>> {
        let segments = token::split(token, self.policy.max_token_size)?;
        let header = header::parse(&token::decode(segments.header)?)?;
        if !self.allows(header.alg) {
            return Err(Error::new(
                ErrorKind::Algorithm,
                "token alg is not allowed by this verifier",
            ));
        }
        self.policy.check_typ(header.typ.as_deref())?;
        let key = self.keys.select(header.kid.as_deref(), header.alg)?;
        let signature = token::decode(segments.signature)?;
        key.verify(header.alg, segments.signing_input, &signature)?;
        token::decode(segments.payload)
    }

    /// Decodes an authenticated payload and applies the claim rules.
    pub fn claims<B: Builder>(&self, payload: &[u8], builder: &mut B, now: f64) -> Result<B::Value> {
        claims::decode(payload, &self.policy, builder, now)
    }

    /// The whole verification into a Rust [`Value`].
    pub fn verify(&self, token: &[u8], now: f64) -> Result<Value> {
        let payload = self.authenticate(token)?;
        self.claims(&payload, &mut ValueBuilder, now)
    }
}
