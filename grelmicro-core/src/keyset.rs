//! A set of keys and the rule that picks one for a token.
//!
//! - A key with a `kid` matches only tokens carrying that `kid`.
//! - A key without one matches any token whose `alg` it serves; a token
//!   reaching those keys is accepted only when exactly one of them fits.
//! - Two different keys under one `kid` make that `kid` unusable (never
//!   "try both").
//! - The chosen key must serve the token's `alg`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::algorithm::Algorithm;
use crate::error::{Error, ErrorKind, Result};
use crate::json::Value;
use crate::key::Key;

/// Default cap on the number of keys read from one JWKS document.
pub const DEFAULT_MAX_KEYS: usize = 100;

#[derive(Clone, Copy, Debug)]
enum Slot {
    One(usize),
    Conflict,
}

/// A key left out of a JWKS, with the reason (never key material).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub kid: Option<String>,
    pub reason: String,
}

/// An immutable set of verification keys.
#[derive(Debug)]
pub struct KeySet {
    keys: Vec<Arc<Key>>,
    by_kid: HashMap<String, Slot>,
    kidless: Vec<usize>,
    skipped: Vec<Skipped>,
    /// Bit `i` set when some key serves `Algorithm::ALL[i]`.
    algorithms: u32,
}

pub(crate) fn algorithm_bit(alg: Algorithm) -> u32 {
    let index = Algorithm::ALL.iter().position(|a| *a == alg).unwrap_or(0);
    1 << index
}

/// The bits of every algorithm a key bound to `alg` accepts.
pub(crate) fn accepted_bits(alg: Algorithm) -> u32 {
    Algorithm::ALL
        .iter()
        .filter(|a| alg.accepts(**a))
        .fold(0, |bits, a| bits | algorithm_bit(*a))
}

impl KeySet {
    /// Keys given in code: a `kid` used twice for different keys is an error.
    pub fn new(keys: Vec<Arc<Key>>) -> Result<KeySet> {
        let mut set = KeySet::empty();
        for key in keys {
            if let Some(kid) = key.kid() {
                if let Some(Slot::One(existing)) = set.by_kid.get(kid) {
                    if !set.keys[*existing].same_material(&key) {
                        return Err(Error::new(
                            ErrorKind::InvalidConfig,
                            "two different keys share one kid",
                        ));
                    }
                    continue;
                }
            }
            set.push(key);
        }
        if set.keys.is_empty() {
            return Err(Error::new(ErrorKind::InvalidConfig, "no keys were given"));
        }
        Ok(set)
    }

    /// A JWKS document (RFC 7517 §5). Unusable keys are skipped and listed
    /// in [`KeySet::skipped`]; a document with no usable key is an error.
    pub fn from_jwks(document: &[u8], allow_symmetric: bool, max_keys: usize) -> Result<KeySet> {
        let bad = |message: &'static str| Error::new(ErrorKind::InvalidKey, message);
        let root = Value::parse(document, 16).map_err(|_| bad("JWKS is not valid JSON"))?;
        let Some(Value::Array(entries)) = root.get("keys") else {
            return Err(bad("JWKS has no keys array"));
        };
        if entries.len() > max_keys {
            return Err(Error::with(
                ErrorKind::InvalidKey,
                format!(
                    "JWKS holds {} keys, over the limit of {max_keys}",
                    entries.len()
                ),
            ));
        }
        let mut set = KeySet::empty();
        for entry in entries {
            let kid = entry.get("kid").and_then(Value::as_str).map(str::to_owned);
            match Key::jwk(entry, None, allow_symmetric) {
                Ok(key) => set.add_from_document(Arc::new(key)),
                Err(err) => set.skipped.push(Skipped {
                    kid,
                    reason: err.message().to_owned(),
                }),
            }
        }
        if set.keys.is_empty() {
            return Err(bad("JWKS holds no usable key"));
        }
        Ok(set)
    }

    fn empty() -> KeySet {
        KeySet {
            keys: Vec::new(),
            by_kid: HashMap::new(),
            kidless: Vec::new(),
            skipped: Vec::new(),
            algorithms: 0,
        }
    }

    fn push(&mut self, key: Arc<Key>) {
        if key.kid().is_none()
            && self
                .kidless
                .iter()
                .any(|i| self.keys[*i].same_material(&key))
        {
            return; // the same kid-less key twice is one candidate, not two
        }
        let index = self.keys.len();
        self.algorithms |= accepted_bits(key.algorithm());
        match key.kid() {
            Some(kid) => {
                self.by_kid.insert(kid.to_owned(), Slot::One(index));
            }
            None => self.kidless.push(index),
        }
        self.keys.push(key);
    }

    fn add_from_document(&mut self, key: Arc<Key>) {
        if let Some(kid) = key.kid() {
            match self.by_kid.get(kid) {
                Some(Slot::One(existing)) => {
                    if !self.keys[*existing].same_material(&key) {
                        let kid = kid.to_owned();
                        self.skipped.push(Skipped {
                            kid: Some(kid.clone()),
                            reason: "two different keys share this kid; the kid is unusable"
                                .to_owned(),
                        });
                        self.by_kid.insert(kid, Slot::Conflict);
                    }
                    return;
                }
                Some(Slot::Conflict) => return,
                None => {}
            }
        }
        self.push(key);
    }

    /// Picks the key for a token's `kid` and `alg`.
    pub fn select(&self, kid: Option<&str>, alg: Algorithm) -> Result<&Key> {
        self.select_index(kid, alg).map(|index| &*self.keys[index])
    }

    /// Like [`KeySet::select`], returning the key's position in [`KeySet::keys`].
    pub fn select_index(&self, kid: Option<&str>, alg: Algorithm) -> Result<usize> {
        if let Some(kid) = kid {
            match self.by_kid.get(kid) {
                Some(Slot::One(index)) => {
                    if !self.keys[*index].algorithm().accepts(alg) {
                        return Err(Error::new(
                            ErrorKind::Algorithm,
                            "token alg does not match the key its kid names",
                        ));
                    }
                    return Ok(*index);
                }
                Some(Slot::Conflict) => {
                    return Err(Error::new(
                        ErrorKind::UnknownKey,
                        "token kid names several different keys",
                    ))
                }
                None => {}
            }
        }
        let mut found = None;
        for index in &self.kidless {
            if self.keys[*index].algorithm().accepts(alg) {
                if found.is_some() {
                    return Err(Error::new(
                        ErrorKind::UnknownKey,
                        "several keys could verify this token and it names none of them",
                    ));
                }
                found = Some(*index);
            }
        }
        found.ok_or(Error::new(
            ErrorKind::UnknownKey,
            "no configured key matches this token",
        ))
    }

    pub fn keys(&self) -> &[Arc<Key>] {
        &self.keys
    }

    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Bitmask of the algorithms some key serves.
    pub(crate) fn algorithm_bits(&self) -> u32 {
        self.algorithms
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(byte: u8, kid: Option<&str>) -> Arc<Key> {
        Arc::new(Key::secret(&[byte; 32], Algorithm::HS256, kid.map(str::to_owned)).unwrap())
    }

    #[test]
    fn kid_selects_exactly() {
        let set = KeySet::new(vec![secret(1, Some("a")), secret(2, Some("b"))]).unwrap();
        assert_eq!(
            set.select(Some("b"), Algorithm::HS256).unwrap().kid(),
            Some("b")
        );
        assert_eq!(
            set.select(Some("c"), Algorithm::HS256).unwrap_err().kind(),
            ErrorKind::UnknownKey
        );
        // A token without kid never reaches keys that have one.
        assert_eq!(
            set.select(None, Algorithm::HS256).unwrap_err().kind(),
            ErrorKind::UnknownKey
        );
        assert_eq!(
            set.select(Some("a"), Algorithm::HS512).unwrap_err().kind(),
            ErrorKind::Algorithm
        );
    }

    #[test]
    fn kidless_key_needs_to_be_the_only_candidate() {
        let one = KeySet::new(vec![secret(1, None)]).unwrap();
        assert!(one.select(None, Algorithm::HS256).is_ok());
        assert!(one.select(Some("hint"), Algorithm::HS256).is_ok());
        let two = KeySet::new(vec![secret(1, None), secret(2, None)]).unwrap();
        assert_eq!(
            two.select(None, Algorithm::HS256).unwrap_err().kind(),
            ErrorKind::UnknownKey
        );
    }

    #[test]
    fn duplicate_kid_in_code_is_a_config_error() {
        let err = KeySet::new(vec![secret(1, Some("a")), secret(2, Some("a"))]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig);
        // The same key twice is harmless.
        assert_eq!(
            KeySet::new(vec![secret(1, Some("a")), secret(1, Some("a"))])
                .unwrap()
                .len(),
            1
        );
        assert!(KeySet::new(vec![]).is_err());
    }

    #[test]
    fn jwks_skips_unusable_and_conflicting_keys() {
        let k1 = crate::token::encode(&[1; 32]);
        let k2 = crate::token::encode(&[2; 32]);
        let doc = format!(
            r#"{{"keys":[
              {{"kty":"oct","alg":"HS256","kid":"dup","k":"{k1}"}},
              {{"kty":"oct","alg":"HS256","kid":"dup","k":"{k2}"}},
              {{"kty":"oct","alg":"HS256","kid":"ok","k":"{k1}"}},
              {{"kty":"EC","crv":"P-256","kid":"bad","x":"AA","y":"AA"}}
            ]}}"#
        );
        let set = KeySet::from_jwks(doc.as_bytes(), true, 10).unwrap();
        assert!(set.select(Some("ok"), Algorithm::HS256).is_ok());
        assert_eq!(
            set.select(Some("dup"), Algorithm::HS256)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        let kids: Vec<_> = set.skipped().iter().map(|s| s.kid.clone()).collect();
        assert_eq!(kids, vec![Some("dup".to_owned()), Some("bad".to_owned())]);
        // Symmetric keys are refused without the opt-in.
        assert_eq!(
            KeySet::from_jwks(doc.as_bytes(), false, 10)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidKey
        );
        assert!(KeySet::from_jwks(doc.as_bytes(), true, 3).is_err());
        assert!(KeySet::from_jwks(b"{}", true, 3).is_err());
        assert!(KeySet::from_jwks(b"[]", true, 3).is_err());
    }
}
