//! The verifier: keys plus policy, built once, immutable.
//!
//! Tokens from one issuer share their header segment byte for byte, so the
//! verifier memoises, for a few header segments, what the header decided:
//! the algorithm and the chosen key. A memo is only written after a token
//! with that header passed its signature check (forged headers cannot take
//! the slots), each slot is written once (`OnceLock`), and the memo is a pure
//! function of immutable state, so sharing it between threads is safe.

use std::sync::{Arc, OnceLock};

use crate::algorithm::{Algorithm, AlgorithmSet, Family};
use crate::claims::{self, Verified};
use crate::error::{capped, Detail, Error, ErrorKind, RefusedBy, Result};
use crate::header;
use crate::json::{Builder, Value, ValueBuilder};
use crate::key::Key;
use crate::keyset::KeySet;
use crate::policy::Policy;
use crate::token;

/// Stack room for a decoded signature: the largest one accepted (RSA-8192).
type SignatureRoom = token::Room<1024>;
/// Stack room for a decoded payload: most payloads fit (larger ones go to
/// the heap), so a verification allocates nothing for its segments.
pub type PayloadRoom = token::Room<4096>;

/// Header segments memoised per verifier.
const MEMO_SLOTS: usize = 4;
/// Longer header segments are never memoised.
const MEMO_MAX_HEADER: usize = 512;

#[derive(Debug)]
struct HeaderMemo {
    segment: Box<[u8]>,
    alg: Algorithm,
    key: usize,
}

/// The refusal of a token whose (allowed) `alg` no key held serves.
#[cold]
fn no_key_serves(alg: Algorithm) -> Error {
    alg.refused(
        RefusedBy::Keys,
        format!("no key serves {}, the token's alg", alg.name()),
    )
}

/// Everything needed to check a token, fixed at construction.
#[derive(Debug)]
pub struct Verifier {
    keys: Arc<KeySet>,
    policy: Arc<Policy>,
    allowed: AlgorithmSet,
    /// The policy names its algorithms (they choose within family keys).
    chosen: bool,
    memo: [OnceLock<HeaderMemo>; MEMO_SLOTS],
}

impl Verifier {
    pub fn new(keys: Arc<KeySet>, policy: Arc<Policy>) -> Result<Verifier> {
        // Named algorithms choose among everything the keys can serve;
        // without them, a key of a JWK without alg serves its default alone,
        // and the allow-list never holds an opt-in (ML-DSA) algorithm: those
        // are allowed only when named.
        let served = keys.default_algorithms();
        let allowed = match policy.algorithms {
            Some(named) => named.intersection(keys.algorithms()),
            None => served.without_opt_in(),
        };
        let chosen = policy.algorithms.is_some();
        if allowed.is_empty() && !chosen && !served.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "ML-DSA (post-quantum) algorithms are allowed only when named: \
                 list them in algorithms",
            ));
        }
        if allowed.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "no configured key serves any of the allowed algorithms",
            ));
        }
        Ok(Verifier {
            keys,
            policy,
            allowed,
            chosen,
            memo: Default::default(),
        })
    }

    pub fn keys(&self) -> &KeySet {
        &self.keys
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether tokens under `alg` are accepted at all.
    pub fn allows(&self, alg: Algorithm) -> bool {
        self.allowed.contains(alg)
    }

    fn recall(&self, segment: &[u8]) -> Option<&HeaderMemo> {
        for slot in &self.memo {
            match slot.get() {
                Some(memo) if *memo.segment == *segment => return Some(memo),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }

    fn remember(&self, segment: &[u8], alg: Algorithm, key: usize) {
        if segment.len() > MEMO_MAX_HEADER {
            return;
        }
        for slot in &self.memo {
            if slot.get().is_none() {
                let _ = slot.set(HeaderMemo {
                    segment: segment.into(),
                    alg,
                    key,
                });
                return;
            }
        }
    }

    /// Why a token under `alg` (outside [`Verifier::allows`]) is refused:
    /// the policy leaves `alg` out (named `algorithms` without it, or an
    /// opt-in algorithm not named), or `alg` is allowed and no key serves
    /// it (named but no key of it; with no `algorithms`, the keys' own are
    /// the allow-list). A keys' refusal of a token whose `kid` names a key
    /// held carries that `kid`: no key published later changes what it names.
    #[cold]
    fn not_allowed(&self, alg: Algorithm, kid: Option<&str>) -> Error {
        let name = alg.name();
        let by_keys = match self.policy.algorithms {
            Some(named) if !named.contains(alg) => {
                return alg.refused(
                    RefusedBy::Policy,
                    format!(
                        "token alg {name} is not allowed by this verifier (not in its algorithms)"
                    ),
                )
            }
            None if alg.opt_in() && self.keys.default_algorithms().contains(alg) => {
                return alg.refused(
                    RefusedBy::Policy,
                    format!(
                        "token alg {name} is not allowed by this verifier: ML-DSA \
                         (post-quantum) algorithms are allowed only when named in algorithms"
                    ),
                )
            }
            None => self
                .keys
                .default_only(alg)
                .unwrap_or_else(|| no_key_serves(alg)),
            Some(_) => no_key_serves(alg),
        };
        match kid {
            Some(kid) if self.keys.holds_kid(kid) => {
                by_keys.detail("kid", Detail::Text(capped(kid)))
            }
            _ => by_keys,
        }
    }

    /// Decides algorithm and key from a header segment (no memo).
    fn decide(&self, segment: &[u8]) -> Result<(Algorithm, usize)> {
        let header = header::parse(&token::decode(segment)?, self.policy.max_depth)?;
        if !self.allows(header.alg) {
            return Err(self.not_allowed(header.alg, header.kid.as_deref()));
        }
        self.policy.check_typ(header.typ.as_deref())?;
        let key = self
            .keys
            .select_index(header.kid.as_deref(), header.alg, self.chosen)?;
        Ok((header.alg, key))
    }

    /// Structure, header, key choice and signature: everything that needs no
    /// Python objects. Returns the decoded (now authenticated) payload bytes,
    /// decoded into `room`.
    pub fn authenticate<'r>(&self, token: &[u8], room: &'r mut PayloadRoom) -> Result<&'r [u8]> {
        let segments = token::split(token, self.policy.max_token_size)?;
        let (alg, index, fresh) = match self.recall(segments.header) {
            Some(memo) => (memo.alg, memo.key, false),
            None => {
                let (alg, index) = self.decide(segments.header)?;
                (alg, index, true)
            }
        };
        let key: &Key = &self.keys.keys()[index];
        let mut signature_room = SignatureRoom::new();
        // An ML-DSA signature has one exact size (kilobytes): a segment of
        // any other length is refused before it is decoded.
        if alg.family() == Family::MlDsa
            && alg.fixed_signature_text_len() != Some(segments.signature.len())
        {
            return Err(Error::new(
                ErrorKind::Signature,
                "signature verification failed",
            ));
        }
        let signature = signature_room.decode(segments.signature)?;
        // Base64 first (cheap, reveals nothing): a mangled payload is refused
        // before the signature work. Its JSON is only read once authenticated.
        let payload = room.decode(segments.payload)?;
        key.verify(alg, segments.signing_input, signature)?;
        if fresh {
            self.remember(segments.header, alg, index);
        }
        Ok(payload)
    }

    /// Decodes an authenticated payload and applies the claim rules; says
    /// until when the answer holds under this verifier's policy.
    pub fn claims<B: Builder>(
        &self,
        payload: &[u8],
        builder: &mut B,
        now: f64,
    ) -> Result<Verified<B::Value>> {
        claims::decode(payload, &self.policy, builder, now)
    }

    /// The whole verification into a Rust [`Value`].
    pub fn verify(&self, token: &[u8], now: f64) -> Result<Verified<Value>> {
        let mut room = PayloadRoom::new();
        let payload = self.authenticate(token, &mut room)?;
        self.claims(payload, &mut ValueBuilder, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyOptions;
    use aws_lc_rs::hmac;

    fn mint(secret: &[u8], header: &str, payload: &str) -> String {
        let input = format!(
            "{}.{}",
            token::encode(header.as_bytes()),
            token::encode(payload.as_bytes())
        );
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), input.as_bytes());
        format!("{input}.{}", token::encode(tag.as_ref()))
    }

    fn verifier(options: PolicyOptions) -> Verifier {
        let keys = vec![
            Arc::new(Key::secret(&[1; 32], Algorithm::HS256, Some("a".into())).unwrap()),
            Arc::new(Key::secret(&[2; 32], Algorithm::HS256, Some("b".into())).unwrap()),
        ];
        Verifier::new(
            Arc::new(KeySet::new(keys).unwrap()),
            Arc::new(Policy::new(options).unwrap()),
        )
        .unwrap()
    }

    #[test]
    fn verifies_and_memoises_only_after_a_good_signature() {
        let v = verifier(PolicyOptions::default());
        let header = r#"{"alg":"HS256","kid":"a"}"#;
        let forged = mint(&[9; 32], header, r#"{"exp":10}"#);
        assert_eq!(
            v.verify(forged.as_bytes(), 0.0).unwrap_err().kind(),
            ErrorKind::Signature
        );
        assert!(
            v.memo[0].get().is_none(),
            "a forged token must not fill a memo slot"
        );
        let good = mint(&[1; 32], header, r#"{"exp":10}"#);
        assert!(v.verify(good.as_bytes(), 0.0).is_ok());
        assert!(v.memo[0].get().is_some());
        // The memoised header still checks the signature with the right key.
        assert_eq!(
            v.verify(forged.as_bytes(), 0.0).unwrap_err().kind(),
            ErrorKind::Signature
        );
        assert!(v.verify(good.as_bytes(), 0.0).is_ok());
        // Another kid picks another key.
        let other = mint(&[2; 32], r#"{"alg":"HS256","kid":"b"}"#, r#"{"exp":10}"#);
        assert!(v.verify(other.as_bytes(), 0.0).is_ok());
        let swapped = mint(&[1; 32], r#"{"alg":"HS256","kid":"b"}"#, r#"{"exp":10}"#);
        assert_eq!(
            v.verify(swapped.as_bytes(), 0.0).unwrap_err().kind(),
            ErrorKind::Signature
        );
    }

    #[test]
    fn memo_slots_are_bounded() {
        let v = verifier(PolicyOptions::default());
        for i in 0..10 {
            let header = format!(r#"{{"alg":"HS256","kid":"a","x":{i}}}"#);
            let token = mint(&[1; 32], &header, r#"{"exp":10}"#);
            assert!(v.verify(token.as_bytes(), 0.0).is_ok());
        }
        assert!(v.memo.iter().all(|slot| slot.get().is_some()));
        let late = mint(
            &[1; 32],
            r#"{"alg":"HS256","kid":"a","x":99}"#,
            r#"{"exp":10}"#,
        );
        assert!(v.verify(late.as_bytes(), 0.0).is_ok());
    }

    #[test]
    fn policy_algorithms_limit_the_keys() {
        let v = verifier(PolicyOptions {
            algorithms: Some(vec!["HS256".into()]),
            ..Default::default()
        });
        assert!(v.allows(Algorithm::HS256));
        assert!(!v.allows(Algorithm::RS256));
        let keys = Arc::new(
            KeySet::new(vec![Arc::new(
                Key::secret(&[1; 32], Algorithm::HS256, None).unwrap(),
            )])
            .unwrap(),
        );
        let policy = Arc::new(
            Policy::new(PolicyOptions {
                algorithms: Some(vec!["RS256".into()]),
                ..Default::default()
            })
            .unwrap(),
        );
        assert_eq!(
            Verifier::new(keys, policy).unwrap_err().kind(),
            ErrorKind::InvalidConfig
        );
    }

    /// The refusal of a token under `header` (signed by key `a`), with its
    /// `refused_by` and `algorithm` context.
    fn refused(v: &Verifier, header: &str) -> (Error, Option<String>, Option<String>) {
        let token = mint(&[1; 32], header, r#"{"exp":10}"#);
        let err = v.verify(token.as_bytes(), 0.0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Algorithm, "{err}");
        let text = |name: &str| {
            err.context().iter().find_map(|(n, d)| match d {
                Detail::Text(t) if *n == name => Some(t.clone()),
                _ => None,
            })
        };
        let (by, alg) = (text("refused_by"), text("algorithm"));
        (err, by, alg)
    }

    #[test]
    fn an_algorithm_refusal_says_whether_the_policy_or_the_keys_refused() {
        let some = |by: &str| Some(by.to_owned());
        // Named algorithms: one left out is the policy's refusal; one named
        // but served by no key is the keys'.
        let named = verifier(PolicyOptions {
            algorithms: Some(vec!["HS256".into(), "HS384".into()]),
            ..Default::default()
        });
        let (err, by, alg) = refused(&named, r#"{"alg":"RS256","kid":"a"}"#);
        assert_eq!((by, alg), (some("policy"), some("RS256")));
        assert_eq!(
            err.message(),
            "token alg RS256 is not allowed by this verifier (not in its algorithms)"
        );
        let (err, by, alg) = refused(&named, r#"{"alg":"HS384","kid":"a"}"#);
        assert_eq!((by, alg), (some("keys"), some("HS384")));
        assert_eq!(err.message(), "no key serves HS384, the token's alg");
        // The kid names a key held: said, since no new key changes that.
        assert!(err.context().contains(&("kid", Detail::Text("a".into()))));
        let (err, ..) = refused(&named, r#"{"alg":"HS384","kid":"new"}"#);
        assert!(!err.context().iter().any(|(name, _)| *name == "kid"));
        let (err, ..) = refused(&named, r#"{"alg":"RS256","kid":"a"}"#);
        assert!(!err.context().iter().any(|(name, _)| *name == "kid"));
        // No algorithms named: the keys' own are the allow-list.
        let plain = verifier(PolicyOptions::default());
        let (err, by, alg) = refused(&plain, r#"{"alg":"ES256","kid":"a"}"#);
        assert_eq!((by, alg), (some("keys"), some("ES256")));
        assert_eq!(err.message(), "no key serves ES256, the token's alg");
    }

    #[test]
    fn a_kid_naming_a_key_of_another_algorithm_is_the_keys_refusal() {
        let keys = vec![
            Arc::new(Key::secret(&[1; 32], Algorithm::HS256, Some("a".into())).unwrap()),
            Arc::new(Key::secret(&[3; 48], Algorithm::HS384, Some("c".into())).unwrap()),
        ];
        let v = Verifier::new(
            Arc::new(KeySet::new(keys).unwrap()),
            Arc::new(Policy::new(PolicyOptions::default()).unwrap()),
        )
        .unwrap();
        let (err, by, alg) = refused(&v, r#"{"alg":"HS384","kid":"a"}"#);
        assert_eq!(
            (by.as_deref(), alg.as_deref()),
            (Some("keys"), Some("HS384"))
        );
        assert_eq!(
            err.message(),
            "the key the token's kid names does not serve HS384, the token's alg"
        );
        assert!(err.context().contains(&("kid", Detail::Text("a".into()))));
    }

    #[test]
    fn an_unknown_alg_travels_capped_in_the_context_never_in_the_message() {
        let v = verifier(PolicyOptions::default());
        let long = "X".repeat(300);
        let (err, by, alg) = refused(&v, &format!(r#"{{"alg":"{long}","kid":"a"}}"#));
        assert_eq!(by, None);
        assert_eq!(alg, Some("X".repeat(128)));
        assert!(!err.message().contains("XX"), "{}", err.message());
        let (err, _, alg) = refused(&v, r#"{"alg":"none","kid":"a"}"#);
        assert_eq!(alg.as_deref(), Some("none"));
        assert_eq!(err.message(), "unsecured tokens (alg none) are refused");
    }

    #[test]
    fn the_answer_holds_until_exp_or_this_policy_s_max_age() {
        let token = mint(
            &[1; 32],
            r#"{"alg":"HS256","kid":"a"}"#,
            r#"{"exp":1000,"iat":100}"#,
        );
        let plain = verifier(PolicyOptions::default());
        assert_eq!(
            plain.verify(token.as_bytes(), 150.0).unwrap().valid_until,
            Some(1000.0)
        );
        let aged = verifier(PolicyOptions {
            max_age: Some(60.0),
            ..Default::default()
        });
        assert_eq!(
            aged.verify(token.as_bytes(), 150.0).unwrap().valid_until,
            Some(160.0)
        );
    }

    #[test]
    fn typ_policy_applies() {
        let v = verifier(PolicyOptions {
            typ: Some("at+jwt".into()),
            ..Default::default()
        });
        let ok = mint(
            &[1; 32],
            r#"{"alg":"HS256","kid":"a","typ":"at+JWT"}"#,
            r#"{"exp":10}"#,
        );
        assert!(v.verify(ok.as_bytes(), 0.0).is_ok());
        let bad = mint(
            &[1; 32],
            r#"{"alg":"HS256","kid":"a","typ":"JWT"}"#,
            r#"{"exp":10}"#,
        );
        assert_eq!(
            v.verify(bad.as_bytes(), 0.0).unwrap_err().kind(),
            ErrorKind::Type
        );
    }
}
