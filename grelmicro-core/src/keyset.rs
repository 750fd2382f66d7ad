//! A set of keys and the rule that picks one for a token.
//!
//! - A key with a `kid` matches only tokens carrying that `kid`; a key
//!   without one matches a token with any `kid` (then only a hint).
//! - A token without `kid` is accepted only when exactly one key (with or
//!   without a `kid` of its own) serves its `alg`: a one-key JWKS verifies
//!   kid-less tokens, a two-key one does not.
//! - Two different keys under one `kid` make that `kid` unusable (never
//!   "try both"), wherever the keys come from: a JWKS, keys given in code,
//!   both combined, a rotation. The conflict is listed in
//!   [`KeySet::skipped`]; a set left with no usable key is an error.
//! - The chosen key must serve the token's `alg`. A key of a JWK without
//!   `alg` serves its family's algorithms that the verifier's `algorithms`
//!   name, or its family's default alone (RS256, HS256) when the verifier
//!   names none ([`Key::serves`]); never another family's.

use std::collections::HashMap;
use std::sync::Arc;

use crate::algorithm::{Algorithm, AlgorithmSet};
use crate::certificates::{certificate_key, certificate_map};
use crate::error::{capped, Detail, Error, ErrorKind, RefusedBy, Result};
use crate::json::Value;
use crate::key::Key;

/// Default cap on the number of keys read from one JWKS document.
pub const DEFAULT_MAX_KEYS: usize = 100;

#[derive(Clone, Copy, Debug)]
enum Slot {
    One(usize),
    Conflict,
}

/// Which kind of skip a [`Skipped`] is: a stable kebab-case code, for
/// programs to act on; the `reason` beside it is for people and may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipCode {
    /// A JWKS entry that is no usable verification key: malformed, an
    /// unsupported type or curve, not for signatures, symmetric unallowed.
    InvalidKey,
    /// A JWKS entry refused as too weak (small RSA modulus, short secret).
    WeakKey,
    /// A JWKS entry holding private key material: published by mistake.
    PrivateKey,
    /// Two different keys share this `kid`: the `kid` is unusable.
    KidConflict,
    /// An HMAC secret that is the text of a public member of another key in
    /// the set (issue 33, D5): anyone holding that public key could forge.
    ExposedSecret,
}

impl SkipCode {
    /// Every code, in declaration order.
    pub const ALL: [SkipCode; 5] = [
        SkipCode::InvalidKey,
        SkipCode::WeakKey,
        SkipCode::PrivateKey,
        SkipCode::KidConflict,
        SkipCode::ExposedSecret,
    ];

    /// The stable kebab-case name of this code.
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipCode::InvalidKey => "invalid-key",
            SkipCode::WeakKey => "weak-key",
            SkipCode::PrivateKey => "private-key",
            SkipCode::KidConflict => "kid-conflict",
            SkipCode::ExposedSecret => "exposed-secret",
        }
    }

    /// The code of a JWKS `entry` that [`Key::jwk`] refused with `err`.
    /// Private members name the skip whatever else the entry gets wrong: a
    /// leaked private key is the news, not its `use` or its size.
    fn of_refused(entry: &Value, err: &Error) -> SkipCode {
        if Key::jwk_holds_private_material(entry) {
            SkipCode::PrivateKey
        } else if err.kind() == ErrorKind::WeakKey {
            SkipCode::WeakKey
        } else {
            SkipCode::InvalidKey
        }
    }
}

/// A key left out of a set: its code and a reason (never key material).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub kid: Option<String>,
    pub code: SkipCode,
    pub reason: String,
}

/// An immutable set of verification keys.
#[derive(Debug)]
pub struct KeySet {
    /// Every key given, including those under a conflicting `kid` (kept so
    /// that combining key sets re-derives the same conflicts).
    keys: Vec<Arc<Key>>,
    /// `usable[i]`: `keys[i]` can be chosen (its `kid`, if any, is not in conflict).
    usable: Vec<bool>,
    by_kid: HashMap<String, Slot>,
    kidless: Vec<usize>,
    skipped: Vec<Skipped>,
    /// Every algorithm some key can serve (family keys: their whole family).
    algorithms: AlgorithmSet,
    /// Every algorithm some key serves when no `algorithms` are given
    /// (family keys: their default alone).
    defaults: AlgorithmSet,
}

const CONFLICT: &str = "two different keys share this kid; the kid is unusable";
const EXPOSED: &str = "this HMAC secret is the text of a public key member (n, e, x, y or pub) \
                       of another key in the set: anyone holding that public key could forge \
                       tokens; the secret is not used";

fn unknown_key(message: &'static str, kid: Option<&str>) -> Error {
    let err = Error::new(ErrorKind::UnknownKey, message);
    match kid {
        Some(kid) => err.detail("kid", Detail::Text(capped(kid))),
        None => err,
    }
}

/// A token under `alg`, refused because a key without `alg` of its own
/// verifies its family's `default` alone when the verifier names no
/// `algorithms` (names only: both are algorithms of the closed set).
fn default_only(default: Algorithm, alg: Algorithm) -> Error {
    alg.refused(
        RefusedBy::Keys,
        format!(
            "token alg {} is not accepted: a JWK without alg verifies {} only unless the \
             verifier names its algorithms (for example algorithms=[\"{}\", \"{}\"])",
            alg.name(),
            default.name(),
            default.name(),
            alg.name()
        ),
    )
}

/// A key set over `max_keys` entries is refused whole.
fn too_many(count: usize, max_keys: usize) -> Result<()> {
    if count > max_keys {
        return Err(Error::with(
            ErrorKind::InvalidKey,
            format!("JWKS holds {count} keys, over the limit of {max_keys}"),
        ));
    }
    Ok(())
}

impl KeySet {
    /// Keys given in code (or gathered from several sources). The same key
    /// twice counts once; two different keys under one `kid` make that `kid`
    /// unusable, as in a JWKS (listed in [`KeySet::skipped`]).
    pub fn new(keys: Vec<Arc<Key>>) -> Result<KeySet> {
        if keys.is_empty() {
            return Err(Error::new(ErrorKind::InvalidConfig, "no keys were given"));
        }
        let mut set = KeySet::empty();
        for key in keys {
            set.add(key);
        }
        set.finish(ErrorKind::InvalidConfig)
    }

    /// A JWKS document (RFC 7517 §5). Unusable keys are skipped and listed
    /// in [`KeySet::skipped`]; a document with no usable key is an error.
    pub fn from_jwks(document: &[u8], allow_symmetric: bool, max_keys: usize) -> Result<KeySet> {
        let bad = |message: &'static str| Error::new(ErrorKind::InvalidKey, message);
        let root = Value::parse(document, 16).map_err(|_| bad("JWKS is not valid JSON"))?;
        if let Some(certificates) = certificate_map(&root) {
            return KeySet::from_certificates(certificates, max_keys);
        }
        let Some(Value::Array(entries)) = root.get("keys") else {
            return Err(bad(
                "JWKS has no keys array (nor is it an object of key ids to PEM certificates)",
            ));
        };
        too_many(entries.len(), max_keys)?;
        let mut set = KeySet::empty();
        for entry in entries {
            let kid = entry.get("kid").and_then(Value::as_str).map(str::to_owned);
            match Key::jwk(entry, None, allow_symmetric) {
                Ok(key) => set.add(Arc::new(key)),
                Err(err) => set.skipped.push(Skipped {
                    kid,
                    code: SkipCode::of_refused(entry, &err),
                    reason: err.message().to_owned(),
                }),
            }
        }
        set.finish(ErrorKind::InvalidKey)
    }

    /// The X.509 form some providers publish beside their JWKS (Google's
    /// `.../robot/v1/metadata/x509/...`, Firebase's `securetoken`): an
    /// object of `kid` to a PEM certificate. Each certificate's public key
    /// is used under its `kid` (the certificate is not validated as a
    /// chain: the document's origin is what is trusted, as for a JWKS).
    /// Unusable entries are skipped and listed; none usable is an error.
    fn from_certificates(entries: &[(String, Value)], max_keys: usize) -> Result<KeySet> {
        too_many(entries.len(), max_keys)?;
        let mut set = KeySet::empty();
        for (kid, entry) in entries {
            let text = entry.as_str().unwrap_or_default();
            match certificate_key(kid, text) {
                Ok(key) => set.add(Arc::new(key)),
                Err(err) => set.skipped.push(Skipped {
                    kid: Some(kid.clone()),
                    code: if err.kind() == ErrorKind::WeakKey {
                        SkipCode::WeakKey
                    } else {
                        SkipCode::InvalidKey
                    },
                    reason: format!("certificate: {}", err.message()),
                }),
            }
        }
        set.finish(ErrorKind::InvalidKey)
    }

    fn empty() -> KeySet {
        KeySet {
            keys: Vec::new(),
            usable: Vec::new(),
            by_kid: HashMap::new(),
            kidless: Vec::new(),
            skipped: Vec::new(),
            algorithms: AlgorithmSet::EMPTY,
            defaults: AlgorithmSet::EMPTY,
        }
    }

    fn add(&mut self, key: Arc<Key>) {
        let index = self.keys.len();
        match key.kid() {
            None => {
                if self
                    .kidless
                    .iter()
                    .any(|i| self.keys[*i].same_material(&key))
                {
                    return; // the same kid-less key twice is one candidate, not two
                }
                self.kidless.push(index);
            }
            Some(kid) => {
                let same_kid = |k: &Arc<Key>| k.kid() == Some(kid);
                if self
                    .keys
                    .iter()
                    .any(|k| same_kid(k) && k.same_material(&key))
                {
                    return; // the same key twice is harmless
                }
                match self.by_kid.get(kid) {
                    None => {
                        self.by_kid.insert(kid.to_owned(), Slot::One(index));
                    }
                    Some(Slot::One(_)) => {
                        self.skipped.push(Skipped {
                            kid: Some(kid.to_owned()),
                            code: SkipCode::KidConflict,
                            reason: CONFLICT.to_owned(),
                        });
                        self.by_kid.insert(kid.to_owned(), Slot::Conflict);
                    }
                    Some(Slot::Conflict) => {}
                }
            }
        }
        self.keys.push(key);
    }

    /// Marks the usable keys; refuses a set with none.
    fn finish(mut self, failure: ErrorKind) -> Result<KeySet> {
        let by_kid = &self.by_kid;
        let keys = &self.keys;
        let mut exposed = Vec::new();
        self.usable = keys
            .iter()
            .map(|k| {
                // A secret that is the text of a public member of a key in
                // the same set is no secret (issue 33, D5): withdrawn.
                if keys.iter().any(|public| k.secret_is_member_of(public)) {
                    exposed.push(Skipped {
                        kid: k.kid().map(str::to_owned),
                        code: SkipCode::ExposedSecret,
                        reason: EXPOSED.to_owned(),
                    });
                    return false;
                }
                match k.kid() {
                    Some(kid) => matches!(by_kid.get(kid), Some(Slot::One(_))),
                    None => true,
                }
            })
            .collect();
        self.skipped.extend(exposed);
        // Keys under a conflicting kid still count here, so a token naming
        // that kid is refused as unknown-key (what it is), not as algorithm.
        self.algorithms = self
            .keys
            .iter()
            .fold(AlgorithmSet::EMPTY, |set, k| set.union(k.algorithms()));
        self.defaults = self.keys.iter().fold(AlgorithmSet::EMPTY, |set, k| {
            set.union(AlgorithmSet::accepted_by(k.algorithm()))
        });
        if !self.usable.contains(&true) {
            if self
                .skipped
                .iter()
                .any(|s| s.code == SkipCode::ExposedSecret)
            {
                return Err(Error::new(ErrorKind::WeakKey, EXPOSED));
            }
            return Err(Error::new(
                failure,
                if self.keys.is_empty() {
                    "no usable key"
                } else {
                    "no usable key: every kid given names two different keys"
                },
            ));
        }
        Ok(self)
    }

    /// Picks the key for a token's `kid` and `alg`. `chosen`: the verifier
    /// names its `algorithms` (they choose within a family key's family).
    pub fn select(&self, kid: Option<&str>, alg: Algorithm, chosen: bool) -> Result<&Key> {
        self.select_index(kid, alg, chosen)
            .map(|index| &*self.keys[index])
    }

    /// Like [`KeySet::select`], returning the key's position in [`KeySet::keys`].
    pub fn select_index(&self, kid: Option<&str>, alg: Algorithm, chosen: bool) -> Result<usize> {
        let Some(kid) = kid else {
            // No kid: any usable key may be the one, if it is the only one.
            let mut found: Option<usize> = None;
            for (index, key) in self.keys.iter().enumerate() {
                if self.usable[index] && key.serves(alg, chosen) {
                    if let Some(first) = found {
                        if self.keys[first].same_material(key) {
                            continue; // one key listed with and without a kid
                        }
                        return Err(unknown_key(
                            "several keys could verify this token and it names none of them (no kid)",
                            None,
                        ));
                    }
                    found = Some(index);
                }
            }
            return found.ok_or(unknown_key("no configured key matches this token", None));
        };
        match self.by_kid.get(kid) {
            Some(Slot::One(index)) => {
                let key = &self.keys[*index];
                if !self.usable[*index] {
                    return Err(unknown_key(
                        "the key this kid names is not used (listed as skipped)",
                        Some(kid),
                    ));
                }
                if !key.serves(alg, chosen) {
                    let err = if key.is_family() && key.algorithms().contains(alg) {
                        default_only(key.algorithm(), alg)
                    } else {
                        alg.refused(
                            RefusedBy::Keys,
                            format!(
                                "the key the token's kid names does not serve {}, the token's alg",
                                alg.name()
                            ),
                        )
                    };
                    return Err(err.detail("kid", Detail::Text(capped(kid))));
                }
                return Ok(*index);
            }
            Some(Slot::Conflict) => {
                return Err(unknown_key(
                    "token kid names several different keys",
                    Some(kid),
                ))
            }
            None => {}
        }
        let mut found = None;
        for index in &self.kidless {
            if self.usable[*index] && self.keys[*index].serves(alg, chosen) {
                if found.is_some() {
                    return Err(unknown_key(
                        "several keys without a kid could verify this token",
                        Some(kid),
                    ));
                }
                found = Some(*index);
            }
        }
        found.ok_or_else(|| unknown_key("no configured key has the token's kid", Some(kid)))
    }

    /// Whether everything verified under `old` still holds under this set:
    /// no key of `old` is gone, and every token that selected a key under
    /// `old` (by [`KeySet::select_index`], so this follows that rule
    /// wherever it goes) selects the same key here. A verified-token cache
    /// filled under `old` may be kept only then.
    ///
    /// Tokens are told apart only by `alg` and by what their `kid` names:
    /// no kid, a kid of either set, or any other kid (all alike), so each
    /// such class is tried once.
    pub fn keeps_selections_of(&self, old: &KeySet) -> bool {
        let present = |key: &Arc<Key>| {
            self.keys
                .iter()
                .any(|k| k.kid() == key.kid() && k.same_material(key))
        };
        if !old.keys.iter().all(present) {
            return false;
        }
        let mut unnamed = String::from("\0");
        while old.by_kid.contains_key(&unnamed) || self.by_kid.contains_key(&unnamed) {
            unnamed.push('\0');
        }
        let named = old.by_kid.keys().chain(self.by_kid.keys());
        let kids = [None, Some(unnamed.as_str())]
            .into_iter()
            .chain(named.map(|kid| Some(kid.as_str())));
        // Whether the verifier names its algorithms changes what a key
        // without `alg` serves: both ways must keep every choice.
        for kid in kids {
            for alg in Algorithm::ALL {
                for chosen in [false, true] {
                    let Ok(before) = old.select_index(kid, alg, chosen) else {
                        continue; // nothing under old: nothing cached to keep
                    };
                    match self.select_index(kid, alg, chosen) {
                        Ok(after) if self.keys[after].same_material(&old.keys[before]) => {}
                        _ => return false,
                    }
                }
            }
        }
        true
    }

    pub fn keys(&self) -> &[Arc<Key>] {
        &self.keys
    }

    /// Whether some key is held under `kid` (one, or several in conflict).
    pub(crate) fn holds_kid(&self, kid: &str) -> bool {
        self.by_kid.contains_key(kid)
    }

    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The algorithms some key can serve (family keys: their whole family).
    pub(crate) fn algorithms(&self) -> AlgorithmSet {
        self.algorithms
    }

    /// The algorithms some key serves when the verifier names none.
    pub(crate) fn default_algorithms(&self) -> AlgorithmSet {
        self.defaults
    }

    /// Why a token under `alg` is refused by a verifier given no
    /// `algorithms`, when a key without `alg` of its own could verify it
    /// were `alg` named; `None` when no such key exists.
    pub(crate) fn default_only(&self, alg: Algorithm) -> Option<Error> {
        self.keys
            .iter()
            .find(|k| k.is_family() && k.algorithms().contains(alg))
            .map(|k| default_only(k.algorithm(), alg))
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

    fn ed25519(x: &str, alg: &str, kid: Option<&str>) -> Arc<Key> {
        let kid = kid.map_or(String::new(), |k| format!(r#","kid":"{k}""#));
        let jwk = format!(r#"{{"kty":"OKP","crv":"Ed25519","alg":"{alg}","x":"{x}"{kid}}}"#);
        Arc::new(Key::jwk_json(jwk.as_bytes(), None, false).unwrap())
    }

    /// RFC 8032 §7.1 test 1 and test 2 public keys.
    const ED_1: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
    const ED_2: &str = "PUAXw-hDiVqStwqnTRt-vJyYLM8uxJaMwM1V8Sr0Zgw";

    fn keeps(old: Vec<Arc<Key>>, new: Vec<Arc<Key>>) -> bool {
        KeySet::new(new)
            .unwrap()
            .keeps_selections_of(&KeySet::new(old).unwrap())
    }

    #[test]
    fn selections_survive_only_additions_that_change_no_choice() {
        let (a, b, c) = (
            secret(1, Some("a")),
            secret(2, Some("b")),
            secret(3, Some("c")),
        );
        // The same keys, or a new kid beside two kid-named keys (kid-less
        // tokens were already ambiguous): every choice stays.
        assert!(keeps(
            vec![a.clone(), b.clone()],
            vec![a.clone(), b.clone()]
        ));
        assert!(keeps(
            vec![a.clone(), b.clone()],
            vec![a.clone(), b.clone(), c.clone()]
        ));
        // A removed key: what it verified must stop verifying.
        assert!(!keeps(vec![a.clone(), b.clone()], vec![a.clone()]));
        // A second key for an algorithm that had one: a kid-less token that
        // chose `a` is now ambiguous.
        assert!(!keeps(vec![a.clone()], vec![a.clone(), b.clone()]));
        // A key of another algorithm changes nothing for HS256 tokens.
        let other = Arc::new(Key::secret(&[4; 48], Algorithm::HS384, Some("d".into())).unwrap());
        assert!(keeps(vec![a.clone()], vec![a.clone(), other]));
        // A reused kid: the kid now names two keys and is unusable.
        assert!(!keeps(
            vec![a.clone(), b.clone()],
            vec![a.clone(), b.clone(), secret(5, Some("a"))]
        ));
        // A kid-less key: it now answers tokens whose kid names nothing...
        // which nothing did before; but a kid-less token had `a` or `b`.
        assert!(keeps(
            vec![a.clone(), b.clone()],
            vec![a.clone(), b.clone(), secret(6, None)]
        ));
        assert!(!keeps(vec![a.clone()], vec![a.clone(), secret(6, None)]));
        // An old kid-less key answered unknown kids; a new key under such a
        // kid takes them over.
        let loose = secret(7, None);
        assert!(!keeps(vec![loose.clone()], vec![loose, c]));
    }

    #[test]
    fn an_ed25519_key_named_either_way_counts_for_both_names() {
        // A kid-less EdDSA token chose the only Ed25519 key; a second one
        // published under the other name (`Ed25519`) makes it ambiguous.
        let first = ed25519(ED_1, "EdDSA", Some("one"));
        let second = ed25519(ED_2, "Ed25519", Some("two"));
        let before = KeySet::new(vec![first.clone()]).unwrap();
        let after = KeySet::new(vec![first, second]).unwrap();
        assert!(before.select_index(None, Algorithm::EdDSA, false).is_ok());
        assert_eq!(
            after
                .select_index(None, Algorithm::EdDSA, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        assert!(!after.keeps_selections_of(&before));
        assert!(before.keeps_selections_of(&before));
    }

    #[test]
    fn kid_selects_exactly() {
        let set = KeySet::new(vec![secret(1, Some("a")), secret(2, Some("b"))]).unwrap();
        assert_eq!(
            set.select(Some("b"), Algorithm::HS256, false)
                .unwrap()
                .kid(),
            Some("b")
        );
        assert_eq!(
            set.select(Some("c"), Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        // A token without kid: two keys could verify it, so neither is chosen.
        assert_eq!(
            set.select(None, Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        // The unknown kid travels as context (capped), never in the message.
        let err = set
            .select(Some(&"z".repeat(500)), Algorithm::HS256, false)
            .unwrap_err();
        assert!(!err.message().contains("zz"));
        assert_eq!(err.context(), &[("kid", Detail::Text("z".repeat(128)))]);
        assert_eq!(
            set.select(Some("a"), Algorithm::HS512, false)
                .unwrap_err()
                .kind(),
            ErrorKind::Algorithm
        );
    }

    #[test]
    fn kidless_key_needs_to_be_the_only_candidate() {
        let one = KeySet::new(vec![secret(1, None)]).unwrap();
        assert!(one.select(None, Algorithm::HS256, false).is_ok());
        assert!(one.select(Some("hint"), Algorithm::HS256, false).is_ok());
        let two = KeySet::new(vec![secret(1, None), secret(2, None)]).unwrap();
        assert_eq!(
            two.select(None, Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
    }

    #[test]
    fn a_kidless_token_takes_the_only_key_even_one_with_a_kid() {
        let one = KeySet::new(vec![secret(1, Some("a"))]).unwrap();
        assert_eq!(
            one.select(None, Algorithm::HS256, false).unwrap().kid(),
            Some("a")
        );
        // A kid the token names must still exist.
        assert_eq!(
            one.select(Some("b"), Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        // Not a key of another algorithm.
        assert_eq!(
            one.select(None, Algorithm::HS512, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        let mixed = KeySet::new(vec![secret(1, Some("a")), secret(2, None)]).unwrap();
        assert_eq!(
            mixed
                .select(None, Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        // The same key with and without a kid is one candidate.
        let same = KeySet::new(vec![secret(1, Some("a")), secret(1, None)]).unwrap();
        assert!(same.select(None, Algorithm::HS256, false).is_ok());
    }

    #[test]
    fn duplicate_kid_in_code_makes_the_kid_unusable() {
        let set = KeySet::new(vec![
            secret(1, Some("a")),
            secret(2, Some("a")),
            secret(3, Some("b")),
        ])
        .unwrap();
        assert_eq!(
            set.select(Some("a"), Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        assert!(set.select(Some("b"), Algorithm::HS256, false).is_ok());
        // A kid-less token does not fall back on a conflicting key either.
        assert_eq!(
            set.select(None, Algorithm::HS256, false).unwrap().kid(),
            Some("b")
        );
        assert_eq!(set.skipped()[0].kid.as_deref(), Some("a"));
        // Nothing usable left: an error.
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
        assert!(set.select(Some("ok"), Algorithm::HS256, false).is_ok());
        assert_eq!(
            set.select(Some("dup"), Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        let kids: Vec<_> = set.skipped().iter().map(|s| s.kid.clone()).collect();
        assert_eq!(kids, vec![Some("dup".to_owned()), Some("bad".to_owned())]);
        // Combined with keys given in code, the conflict stays.
        let mut keys = set.keys().to_vec();
        keys.push(secret(1, Some("other")));
        let combined = KeySet::new(keys).unwrap();
        assert_eq!(
            combined
                .select(Some("dup"), Algorithm::HS256, false)
                .unwrap_err()
                .kind(),
            ErrorKind::UnknownKey
        );
        // A one-key JWKS verifies kid-less tokens.
        let single = format!(r#"{{"keys":[{{"kty":"oct","alg":"HS256","kid":"k","k":"{k1}"}}]}}"#);
        let single = KeySet::from_jwks(single.as_bytes(), true, 10).unwrap();
        assert!(single.select(None, Algorithm::HS256, false).is_ok());
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

    #[test]
    fn a_secret_that_is_a_public_members_text_is_withdrawn() {
        // Issue 33, D5: an Ed25519 `x` (any 32 bytes may be one, so no rule
        // on the secret alone can see it) configured as an HMAC secret
        // beside the key it belongs to, in the forms a JWKS or a tool shows.
        let public = ed25519(ED_1, "EdDSA", Some("ed"));
        let x = crate::token::decode(ED_1.as_bytes()).unwrap();
        let hex = x.iter().fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        });
        let standard = base64_simd::STANDARD.encode_to_string(&x);
        for text in [
            ED_1.as_bytes().to_vec(),
            hex.into_bytes(),
            standard.into_bytes(),
            x,
        ] {
            let exposed =
                Arc::new(Key::secret(&text, Algorithm::HS256, Some("hs".into())).unwrap());
            let set = KeySet::new(vec![public.clone(), exposed]).unwrap();
            assert_eq!(set.skipped().len(), 1);
            assert_eq!(set.skipped()[0].kid.as_deref(), Some("hs"));
            assert_eq!(set.skipped()[0].code, SkipCode::ExposedSecret);
            let err = set.select(Some("hs"), Algorithm::HS256, false).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnknownKey);
            assert!(set.select(Some("ed"), Algorithm::EdDSA, false).is_ok());
        }
        // Alone, or beside another key, the same secret is a secret.
        let text = ED_1.as_bytes();
        let alone = Arc::new(Key::secret(text, Algorithm::HS256, None).unwrap());
        let set = KeySet::new(vec![alone.clone(), ed25519(ED_2, "EdDSA", Some("other"))]).unwrap();
        assert!(set.skipped().is_empty());
        // Kid-less, withdrawn too: a kid-less token finds the public key only.
        let set = KeySet::new(vec![alone, ed25519(ED_1, "EdDSA", None)]).unwrap();
        assert_eq!(set.skipped().len(), 1);
        assert!(set.select(None, Algorithm::HS256, false).is_err());
    }

    /// The skips of a set built from `good` and one entry that `code` names
    /// (the match is exhaustive: a new code needs an input here).
    fn skipped_by(code: SkipCode) -> Vec<Skipped> {
        let good =
            format!(r#"{{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","kid":"ed","x":"{ED_1}"}}"#);
        let jwks = |entry: &str| {
            let doc = format!(r#"{{"keys":[{good},{entry}]}}"#);
            KeySet::from_jwks(doc.as_bytes(), true, 10).unwrap()
        };
        let long = crate::token::encode(&[1; 32]);
        let set = match code {
            SkipCode::InvalidKey => {
                jwks(r#"{"kty":"EC","crv":"P-256","kid":"x","x":"AA","y":"AA"}"#)
            }
            SkipCode::WeakKey => jwks(r#"{"kty":"oct","alg":"HS256","kid":"x","k":"AAAA"}"#),
            // Also refused for its `use`: the private member names the skip.
            SkipCode::PrivateKey => jwks(&format!(
                r#"{{"kty":"OKP","crv":"Ed25519","use":"enc","kid":"x","x":"{ED_2}","d":"{ED_1}"}}"#
            )),
            SkipCode::KidConflict => {
                let other = crate::token::encode(&[2; 32]);
                jwks(&format!(
                    r#"{{"kty":"oct","alg":"HS256","kid":"x","k":"{long}"}},
                       {{"kty":"oct","alg":"HS256","kid":"x","k":"{other}"}}"#
                ))
            }
            SkipCode::ExposedSecret => jwks(&format!(
                r#"{{"kty":"oct","alg":"HS256","kid":"x","k":"{}"}}"#,
                crate::token::encode(ED_1.as_bytes())
            )),
        };
        set.skipped().to_vec()
    }

    #[test]
    fn every_skip_code_is_produced_by_some_input() {
        for code in SkipCode::ALL {
            let skipped = skipped_by(code);
            assert_eq!(skipped.len(), 1, "{}: {skipped:?}", code.as_str());
            assert_eq!(skipped[0].code, code);
            assert_eq!(skipped[0].kid.as_deref(), Some("x"));
            assert!(!skipped[0].reason.is_empty());
        }
    }

    #[test]
    fn skip_codes_are_unique_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for code in SkipCode::ALL {
            let name = code.as_str();
            assert!(seen.insert(name), "duplicate code {name}");
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'));
        }
    }
}
