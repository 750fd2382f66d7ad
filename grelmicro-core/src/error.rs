//! The one error type of the core.
//!
//! Every failure carries an [`ErrorKind`] with a stable kebab-case name; the
//! Python layer maps each name to exactly one exception class. Messages never
//! quote token bytes, signatures or key material: signature failures say
//! nothing beyond their kind, claim failures may carry the times involved.

use std::borrow::Cow;
use std::fmt;

/// Why a token, a key or a policy was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    // --- token rejections (the HTTP answer is 401) ---
    /// Not a compact JWS: segments, base64url, JSON or header shape.
    Malformed,
    /// Over the configured size or nesting depth.
    TooLarge,
    /// A JWS feature this verifier refuses (JWE, `crit`, `b64: false`).
    Unsupported,
    /// `alg` missing, unknown, not allowed, or not the chosen key's. A
    /// refusal of a known `alg` says who refused it ([`RefusedBy`]), built by
    /// the algorithm itself (`Algorithm::refused`): this module names no
    /// other module of the crate.
    Algorithm,
    /// No configured key (or more than one) could verify the token.
    UnknownKey,
    /// The signature does not verify.
    Signature,
    /// `exp` has passed.
    Expired,
    /// `nbf` is still ahead.
    NotYetValid,
    /// `iat` is in the future.
    IssuedInFuture,
    /// Older than the configured maximum age (from `iat`).
    TooOld,
    /// `aud` does not match (or is present with no audience configured).
    Audience,
    /// `iss` does not match.
    Issuer,
    /// A required claim is absent.
    MissingClaim,
    /// A registered claim has the wrong JSON type.
    InvalidClaim,
    /// The `typ` header does not match the policy.
    Type,
    // --- build-time refusals (configuration errors) ---
    /// A key could not be parsed or is the wrong kind for its algorithm.
    InvalidKey,
    /// A key is too weak to be trusted (short secret, small RSA modulus).
    WeakKey,
    /// A policy or key-set setting is invalid.
    InvalidConfig,
    // --- DPoP (RFC 9449) refusals; the broken rule is the `check` context ---
    /// A DPoP proof broke one of its rules.
    DpopProof,
    /// A DPoP proof reused (raised by the Python replay store, listed here
    /// so the kind table stays in one place).
    DpopReplay,
    /// The proof key is not the key the access token is bound to.
    DpopBinding,
}

impl ErrorKind {
    /// Every kind, in declaration order (used to prove the Python mapping is complete).
    pub const ALL: [ErrorKind; 21] = [
        ErrorKind::Malformed,
        ErrorKind::TooLarge,
        ErrorKind::Unsupported,
        ErrorKind::Algorithm,
        ErrorKind::UnknownKey,
        ErrorKind::Signature,
        ErrorKind::Expired,
        ErrorKind::NotYetValid,
        ErrorKind::IssuedInFuture,
        ErrorKind::TooOld,
        ErrorKind::Audience,
        ErrorKind::Issuer,
        ErrorKind::MissingClaim,
        ErrorKind::InvalidClaim,
        ErrorKind::Type,
        ErrorKind::InvalidKey,
        ErrorKind::WeakKey,
        ErrorKind::InvalidConfig,
        ErrorKind::DpopProof,
        ErrorKind::DpopReplay,
        ErrorKind::DpopBinding,
    ];

    /// The stable kebab-case name of this kind.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Malformed => "malformed",
            ErrorKind::TooLarge => "too-large",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Algorithm => "algorithm",
            ErrorKind::UnknownKey => "unknown-key",
            ErrorKind::Signature => "signature",
            ErrorKind::Expired => "expired",
            ErrorKind::NotYetValid => "not-yet-valid",
            ErrorKind::IssuedInFuture => "issued-in-future",
            ErrorKind::TooOld => "too-old",
            ErrorKind::Audience => "audience",
            ErrorKind::Issuer => "issuer",
            ErrorKind::MissingClaim => "missing-claim",
            ErrorKind::InvalidClaim => "invalid-claim",
            ErrorKind::Type => "type",
            ErrorKind::InvalidKey => "invalid-key",
            ErrorKind::WeakKey => "weak-key",
            ErrorKind::InvalidConfig => "invalid-config",
            ErrorKind::DpopProof => "dpop-proof",
            ErrorKind::DpopReplay => "dpop-replay",
            ErrorKind::DpopBinding => "dpop-binding",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of structured context on a refusal: configuration values
/// (expected issuers), times, or a short, capped value taken from the token
/// (its `kid`). The Python layer turns these into exception attributes.
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    Number(f64),
    Text(String),
    Texts(Vec<String>),
}

/// Longest token-derived text kept as context (in bytes, cut on a char boundary).
pub const MAX_DETAIL_TEXT: usize = 128;

/// `text` cut to at most [`MAX_DETAIL_TEXT`] bytes.
pub fn capped(text: &str) -> String {
    if text.len() <= MAX_DETAIL_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_DETAIL_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A refusal: its kind plus a message written for people, and optional
/// structured context (built on the error path only).
#[derive(Clone, Debug)]
pub struct Error {
    kind: ErrorKind,
    message: Cow<'static, str>,
    context: Option<Box<[(&'static str, Detail)]>>,
}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for Error {}

impl Error {
    /// An error with a fixed message.
    pub const fn new(kind: ErrorKind, message: &'static str) -> Self {
        Error {
            kind,
            message: Cow::Borrowed(message),
            context: None,
        }
    }

    /// An error with a built message (only for context that is safe to show).
    #[cold]
    pub fn with(kind: ErrorKind, message: String) -> Self {
        Error {
            kind,
            message: Cow::Owned(message),
            context: None,
        }
    }

    /// Adds one piece of structured context.
    #[must_use]
    #[cold]
    pub fn detail(mut self, name: &'static str, value: Detail) -> Self {
        let mut items = self.context.take().map(Vec::from).unwrap_or_default();
        items.push((name, value));
        self.context = Some(items.into_boxed_slice());
        self
    }

    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The same message under another kind, without the context.
    pub(crate) fn rekind(self, kind: ErrorKind) -> Error {
        Error {
            kind,
            message: self.message,
            context: None,
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The structured context, in the order it was added.
    pub fn context(&self) -> &[(&'static str, Detail)] {
        self.context.as_deref().unwrap_or(&[])
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, Error>;

/// Who refused a token's (known) `alg`: the `refused_by` context of an
/// [`ErrorKind::Algorithm`] refusal, beside the `algorithm` it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusedBy {
    /// The verifier's allow-list leaves the algorithm out: no key, held now
    /// or fetched later, makes the token acceptable.
    Policy,
    /// The algorithm is allowed, but no key held serves it (or the key the
    /// token's `kid` names does not).
    Keys,
}

impl RefusedBy {
    /// The stable name carried in the context (`policy` or `keys`).
    pub const fn as_str(self) -> &'static str {
        match self {
            RefusedBy::Policy => "policy",
            RefusedBy::Keys => "keys",
        }
    }
}

/// Short constructors keep call sites readable.
#[cold]
pub(crate) fn malformed(message: &'static str) -> Error {
    Error::new(ErrorKind::Malformed, message)
}

#[cold]
pub(crate) fn invalid_key(message: &'static str) -> Error {
    Error::new(ErrorKind::InvalidKey, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_unique_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for kind in ErrorKind::ALL {
            let name = kind.as_str();
            assert!(seen.insert(name), "duplicate kind {name}");
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'));
        }
        assert_eq!(seen.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn refusers_have_stable_names() {
        assert_eq!(RefusedBy::Policy.as_str(), "policy");
        assert_eq!(RefusedBy::Keys.as_str(), "keys");
    }

    #[test]
    fn display_names_the_kind() {
        let err = Error::new(ErrorKind::Expired, "token expired");
        assert_eq!(err.to_string(), "expired: token expired");
    }
}
