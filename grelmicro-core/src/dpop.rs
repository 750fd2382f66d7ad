//! DPoP proofs (RFC 9449): the sender constraint on an access token.
//!
//! A proof is a compact JWS that carries its own public key in the `jwk`
//! header, so every proof is attacker-supplied key material. It is checked
//! like a token and more strictly: `typ` `dpop+jwt`, an asymmetric algorithm
//! from the allow-list (never HMAC, never `none`), a public `jwk` parsed by
//! the same rules as a configured key ([`Key::jwk`]: key sizes, curves,
//! small-order Ed25519 points, no private members, no `oct`), the signature
//! with that key, then `htm`, `htu` (RFC 9449 §4.3 normalisation), the `iat`
//! window (leeway both ways), `ath` (SHA-256 of the access token) and
//! finally the binding: the RFC 7638 thumbprint of the proof key must equal
//! the access token's `cnf.jkt`.
//!
//! One call checks one proof; the clock is the caller's `now`, and nothing
//! here does I/O. Replay (`jti` seen before) and server nonces are the
//! Python layer's: they need state. The call hands back what they need: a
//! 32-byte replay key (SHA-256 over the thumbprint and the `jti`, so the
//! store never keeps proof text and entries have one size), `iat`, `nonce`.
//!
//! Refusals are a [`Refusal`]: which check failed plus a core [`Error`]
//! whose message never quotes the proof, the token or key material.

use std::fmt::Write as _;

use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::digest;

use crate::algorithm::{Algorithm, AlgorithmSet, Family};
use crate::error::{Detail, Error, ErrorKind, Result};
use crate::header;
use crate::json::Value;
use crate::key::Key;
use crate::policy::{normalise_typ, DEFAULT_MAX_DEPTH, DEFAULT_MAX_TOKEN_SIZE};
use crate::token;

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
            None => Algorithm::ALL
                .into_iter()
                .filter(|a| a.family() != Family::Hmac)
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

    /// Checks one proof for a request (`method`, `uri`) that carried
    /// `access_token`, bound to the key whose thumbprint is `jkt`.
    pub fn verify(
        &self,
        proof: &[u8],
        method: &str,
        uri: &str,
        access_token: &[u8],
        jkt: &str,
        now: f64,
    ) -> std::result::Result<Accepted, Refusal> {
        use Check as C;
        let structure = |err: Error| Refusal::from(C::Structure, err);
        if !now.is_finite() {
            return Err(Refusal::new(
                C::IssuedAt,
                ErrorKind::InvalidConfig,
                "the time to check the proof against is not a finite number",
            ));
        }
        let segments = token::split(proof, self.max_size).map_err(structure)?;

        // Header: the same rules as a token header (alg, crit, b64,
        // duplicates, depth), then typ and the key it carries.
        let header_bytes = token::decode(segments.header).map_err(structure)?;
        let parsed = header::parse(&header_bytes, self.max_depth).map_err(|err| {
            let check = if err.kind() == ErrorKind::Algorithm {
                C::Algorithm
            } else {
                C::Structure
            };
            Refusal::from(check, err)
        })?;
        if parsed.typ.as_deref().map(normalise_typ).as_deref() != Some("dpop+jwt") {
            return Err(Refusal::new(
                C::Type,
                ErrorKind::Type,
                "DPoP proof typ is not dpop+jwt",
            ));
        }
        let alg = parsed.alg;
        if alg.family() == Family::Hmac {
            return Err(Refusal::new(
                C::Algorithm,
                ErrorKind::Algorithm,
                "DPoP proofs must use a public-key algorithm, not HMAC",
            ));
        }
        if !self.allows(alg) {
            return Err(Refusal::new(
                C::Algorithm,
                ErrorKind::Algorithm,
                "DPoP proof alg is not allowed",
            ));
        }
        let header_value = Value::parse(&header_bytes, self.max_depth).map_err(structure)?;
        let Some(jwk) = header_value.get("jwk") else {
            return Err(Refusal::new(
                C::Key,
                ErrorKind::InvalidKey,
                "DPoP proof header has no jwk",
            ));
        };
        let key = Key::jwk(jwk, Some(alg), false).map_err(|err| {
            // The key's own message (private members, weak RSA, off-curve
            // point, small-order Ed25519) says nothing about its bytes.
            Refusal::from(
                C::Key,
                Error::with(
                    ErrorKind::InvalidKey,
                    format!("DPoP proof jwk: {}", err.message()),
                ),
            )
        })?;

        // Signature, then the payload (read only once authenticated).
        let signature = token::decode(segments.signature).map_err(structure)?;
        let payload = token::decode(segments.payload).map_err(structure)?;
        key.verify(alg, segments.signing_input, &signature)
            .map_err(|err| Refusal::from(C::Signature, err))?;
        let claims = Value::parse(&payload, self.max_depth).map_err(structure)?;
        if !matches!(claims, Value::Object(_)) {
            return Err(Refusal::new(
                C::Structure,
                ErrorKind::Malformed,
                "DPoP proof payload is not a JSON object",
            ));
        }

        let jti = match claims.get("jti") {
            Some(Value::String(jti)) if !jti.is_empty() && jti.len() <= MAX_JTI => jti,
            Some(Value::String(_)) => {
                return Err(Refusal::new(
                    C::Jti,
                    ErrorKind::InvalidClaim,
                    "DPoP proof jti is empty or longer than 256 bytes",
                ))
            }
            Some(_) => {
                return Err(Refusal::new(
                    C::Jti,
                    ErrorKind::InvalidClaim,
                    "DPoP proof jti is not a string",
                ))
            }
            None => {
                return Err(Refusal::new(
                    C::Jti,
                    ErrorKind::MissingClaim,
                    "DPoP proof has no jti",
                ))
            }
        };
        match claims.get("htm") {
            Some(Value::String(htm)) if htm == method => {}
            Some(Value::String(_)) => {
                return Err(Refusal::new(
                    C::Method,
                    ErrorKind::InvalidClaim,
                    "DPoP proof htm is not the request method",
                ))
            }
            Some(_) => {
                return Err(Refusal::new(
                    C::Method,
                    ErrorKind::InvalidClaim,
                    "DPoP proof htm is not a string",
                ))
            }
            None => {
                return Err(Refusal::new(
                    C::Method,
                    ErrorKind::MissingClaim,
                    "DPoP proof has no htm",
                ))
            }
        }
        let htu = match claims.get("htu") {
            Some(Value::String(htu)) => htu,
            Some(_) => {
                return Err(Refusal::new(
                    C::Uri,
                    ErrorKind::InvalidClaim,
                    "DPoP proof htu is not a string",
                ))
            }
            None => {
                return Err(Refusal::new(
                    C::Uri,
                    ErrorKind::MissingClaim,
                    "DPoP proof has no htu",
                ))
            }
        };
        let Some(expected_uri) = normalize_htu(uri) else {
            return Err(Refusal::new(
                C::Uri,
                ErrorKind::InvalidConfig,
                "the request URI is not an absolute http(s) URI",
            ));
        };
        if normalize_htu(htu).as_deref() != Some(expected_uri.as_str()) {
            return Err(Refusal::new(
                C::Uri,
                ErrorKind::InvalidClaim,
                "DPoP proof htu is not the request URI",
            ));
        }
        let iat = self.check_iat(claims.get("iat"), now)?;
        match claims.get("ath") {
            Some(Value::String(ath)) => {
                let expected = token::encode(&crate::digest::sha256(access_token));
                if verify_slices_are_equal(ath.as_bytes(), expected.as_bytes()).is_err() {
                    return Err(Refusal::new(
                        C::AccessTokenHash,
                        ErrorKind::InvalidClaim,
                        "DPoP proof ath is not the hash of the access token",
                    ));
                }
            }
            Some(_) => {
                return Err(Refusal::new(
                    C::AccessTokenHash,
                    ErrorKind::InvalidClaim,
                    "DPoP proof ath is not a string",
                ))
            }
            None => {
                return Err(Refusal::new(
                    C::AccessTokenHash,
                    ErrorKind::MissingClaim,
                    "DPoP proof has no ath (required with an access token)",
                ))
            }
        }
        let nonce = match claims.get("nonce") {
            None => None,
            Some(Value::String(nonce)) => Some(nonce.clone()),
            Some(_) => {
                return Err(Refusal::new(
                    C::Nonce,
                    ErrorKind::InvalidClaim,
                    "DPoP proof nonce is not a string",
                ))
            }
        };

        // The binding: the proof key is the key the access token names.
        let thumbprint = thumbprint(jwk).map_err(|err| Refusal::from(C::Key, err))?;
        if verify_slices_are_equal(thumbprint.as_bytes(), jkt.as_bytes()).is_err() {
            return Err(Refusal::new(
                C::Binding,
                ErrorKind::InvalidClaim,
                "the DPoP proof key is not the key the access token is bound to (cnf.jkt)",
            ));
        }
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(thumbprint.as_bytes());
        ctx.update(&[0]);
        ctx.update(jti.as_bytes());
        let mut replay_key = [0u8; 32];
        replay_key.copy_from_slice(ctx.finish().as_ref());
        Ok(Accepted {
            replay_key,
            iat,
            nonce,
            algorithm: alg,
        })
    }

    /// `now - max_age - leeway <= iat <= now + leeway`.
    fn check_iat(&self, value: Option<&Value>, now: f64) -> std::result::Result<f64, Refusal> {
        let iat = match value {
            Some(Value::Int(i)) => *i as f64,
            Some(Value::Float(f)) if f.is_finite() => *f,
            // Beyond 64 bits: no window holds it.
            Some(Value::BigInt(_)) => f64::INFINITY,
            Some(_) => {
                return Err(Refusal::new(
                    Check::IssuedAt,
                    ErrorKind::InvalidClaim,
                    "DPoP proof iat is not a number",
                ))
            }
            None => {
                return Err(Refusal::new(
                    Check::IssuedAt,
                    ErrorKind::MissingClaim,
                    "DPoP proof has no iat",
                ))
            }
        };
        if iat > now + self.leeway {
            return Err(Refusal::from(
                Check::IssuedAt,
                Error::new(ErrorKind::IssuedInFuture, "DPoP proof iat is in the future"),
            ));
        }
        if iat < now - self.max_age - self.leeway {
            return Err(Refusal::from(
                Check::IssuedAt,
                Error::new(
                    ErrorKind::TooOld,
                    "DPoP proof iat is older than the acceptance window",
                ),
            ));
        }
        Ok(iat)
    }
}

/// The RFC 7638 JWK SHA-256 thumbprint (unpadded base64url) of a public
/// JWK: the required members in lexicographic order, no whitespace.
pub fn thumbprint(jwk: &Value) -> Result<String> {
    let text = |name: &str| -> Result<&str> {
        let value = jwk.get(name).and_then(Value::as_str).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidKey,
                "JWK lacks a member its thumbprint needs",
            )
        })?;
        // Base64url values and registered names only: nothing to escape.
        if value.is_empty()
            || !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return Err(Error::new(
                ErrorKind::InvalidKey,
                "JWK member is not a base64url value or a curve name",
            ));
        }
        Ok(value)
    };
    let kty = text("kty")?;
    let mut canonical = String::with_capacity(256);
    match kty {
        "RSA" => {
            let _ = write!(
                canonical,
                r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
                text("e")?,
                text("n")?
            );
        }
        "EC" => {
            let _ = write!(
                canonical,
                r#"{{"crv":"{}","kty":"EC","x":"{}","y":"{}"}}"#,
                text("crv")?,
                text("x")?,
                text("y")?
            );
        }
        "OKP" => {
            let _ = write!(
                canonical,
                r#"{{"crv":"{}","kty":"OKP","x":"{}"}}"#,
                text("crv")?,
                text("x")?
            );
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidKey,
                "JWK kty has no thumbprint here (RSA, EC or OKP)",
            ))
        }
    }
    Ok(token::encode(&crate::digest::sha256(canonical.as_bytes())))
}

/// A URI as RFC 9449 §4.3 compares `htu`: query and fragment dropped, then
/// RFC 3986 syntax- and scheme-based normalisation (scheme and host
/// lowercased, default port dropped, empty path as `/`, percent-encodings
/// upper-cased and unreserved ones decoded, dot segments removed).
/// `None` for anything that is not an absolute `http`/`https` URI of
/// printable ASCII without user information.
pub fn normalize_htu(uri: &str) -> Option<String> {
    if uri.is_empty() || uri.len() > MAX_URI || !uri.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return None;
    }
    let end = uri.find(['?', '#']).unwrap_or(uri.len());
    let (scheme, rest) = uri[..end].split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return None;
    }
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']')?;
        let after = &authority[close + 1..];
        let port = if after.is_empty() {
            None
        } else {
            Some(after.strip_prefix(':')?)
        };
        (&authority[..=close], port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() || (!host.starts_with('[') && host.contains(['[', ']', ':'])) {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(digits) => {
            if digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let number: u32 = digits.parse().ok()?;
            if number > 65_535 {
                return None;
            }
            (number != default_port).then_some(number)
        }
    };
    let mut out = String::with_capacity(end + 1);
    out.push_str(&scheme);
    out.push_str("://");
    out.push_str(&host.to_ascii_lowercase());
    if let Some(port) = port {
        let _ = write!(out, ":{port}");
    }
    let path = percent_normalized(path)?;
    remove_dot_segments(if path.is_empty() { "/" } else { &path }, &mut out);
    Some(out)
}

fn hex_value(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|d| d as u8)
}

/// Percent-encodings upper-cased; those of unreserved characters decoded.
fn percent_normalized(path: &str) -> Option<String> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let high = hex_value(*bytes.get(at + 1)?)?;
            let low = hex_value(*bytes.get(at + 2)?)?;
            let value = (high << 4) | low;
            if value.is_ascii_alphanumeric() || matches!(value, b'-' | b'.' | b'_' | b'~') {
                out.push(value as char);
            } else {
                out.push('%');
                out.push(HEX[high as usize] as char);
                out.push(HEX[low as usize] as char);
            }
            at += 3;
        } else {
            out.push(bytes[at] as char);
            at += 1;
        }
    }
    Some(out)
}

/// RFC 3986 §5.2.4 on an absolute path, appended to `out`.
fn remove_dot_segments(path: &str, out: &mut String) {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    let mut kept: Vec<&str> = Vec::with_capacity(segments.len());
    for (index, segment) in segments.iter().enumerate() {
        match *segment {
            "." => {
                if index == last {
                    kept.push("");
                }
            }
            ".." => {
                kept.pop();
                if index == last {
                    kept.push("");
                }
            }
            other => kept.push(other),
        }
    }
    if kept.is_empty() {
        out.push('/');
    }
    for segment in kept {
        out.push('/');
        out.push_str(segment);
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{
        EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
    };

    const TOKEN: &[u8] = b"access.token.bytes";
    const URI: &str = "https://api.example.com/items";
    const NOW: f64 = 1_700_000_000.0;

    struct Signer {
        pair: EcdsaKeyPair,
        jwk: String,
    }

    fn p256() -> Signer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = pair.public_key().as_ref();
        let jwk = format!(
            r#"{{"kty":"EC","crv":"P-256","x":"{}","y":"{}"}}"#,
            token::encode(&point[1..33]),
            token::encode(&point[33..65])
        );
        Signer { pair, jwk }
    }

    impl Signer {
        fn jkt(&self) -> String {
            thumbprint(&Value::parse(self.jwk.as_bytes(), 8).unwrap()).unwrap()
        }

        fn sign(&self, header: &str, payload: &str) -> Vec<u8> {
            let input = format!(
                "{}.{}",
                token::encode(header.as_bytes()),
                token::encode(payload.as_bytes())
            );
            let sig = self
                .pair
                .sign(&SystemRandom::new(), input.as_bytes())
                .unwrap();
            format!("{input}.{}", token::encode(sig.as_ref())).into_bytes()
        }

        fn header(&self) -> String {
            format!(r#"{{"typ":"dpop+jwt","alg":"ES256","jwk":{}}}"#, self.jwk)
        }

        fn proof(&self, claims: &str) -> Vec<u8> {
            self.sign(&self.header(), claims)
        }
    }

    fn ath() -> String {
        token::encode(&crate::digest::sha256(TOKEN))
    }

    fn claims(extra: &str) -> String {
        format!(
            r#"{{"jti":"j-1","htm":"GET","htu":"{URI}","iat":{NOW},"ath":"{}"{extra}}}"#,
            ath()
        )
    }

    fn verifier() -> ProofVerifier {
        ProofVerifier::new(ProofOptions::default()).unwrap()
    }

    fn check(signer: &Signer, proof: &[u8]) -> std::result::Result<Accepted, Refusal> {
        verifier().verify(proof, "GET", URI, TOKEN, &signer.jkt(), NOW)
    }

    #[test]
    fn a_good_proof_is_accepted() {
        let signer = p256();
        let accepted = check(&signer, &signer.proof(&claims(r#","nonce":"n1""#))).unwrap();
        assert_eq!(accepted.iat, NOW);
        assert_eq!(accepted.nonce.as_deref(), Some("n1"));
        assert_eq!(accepted.algorithm, Algorithm::ES256);
        // Another jti, another replay key; the same jti, the same key.
        let again = check(&signer, &signer.proof(&claims(""))).unwrap();
        assert_eq!(again.replay_key, accepted.replay_key);
        let other = signer.proof(&claims("").replace("j-1", "j-2"));
        assert_ne!(
            check(&signer, &other).unwrap().replay_key,
            accepted.replay_key
        );
    }

    #[test]
    fn each_claim_rule_is_enforced() {
        let signer = p256();
        let cases: [(String, Check); 12] = [
            (claims("").replace(r#""jti":"j-1","#, ""), Check::Jti),
            (claims("").replace(r#""j-1""#, r#""""#), Check::Jti),
            (claims("").replace(r#""j-1""#, "7"), Check::Jti),
            (claims("").replace(r#""GET""#, r#""POST""#), Check::Method),
            (claims("").replace(r#""GET""#, r#""get""#), Check::Method),
            (claims("").replace("/items", "/other"), Check::Uri),
            (
                claims("").replace(&format!("{NOW}"), &format!("{}", NOW + 6.0)),
                Check::IssuedAt,
            ),
            (
                claims("").replace(&format!("{NOW}"), &format!("{}", NOW - 66.0)),
                Check::IssuedAt,
            ),
            (
                claims("").replace(&format!("{NOW}"), &format!("\"{NOW}\"")),
                Check::IssuedAt,
            ),
            (claims("").replace(&ath(), "AAAA"), Check::AccessTokenHash),
            (claims(r#","nonce":1"#), Check::Nonce),
            (r#"["not an object"]"#.to_owned(), Check::Structure),
        ];
        for (payload, expected) in cases {
            let refusal = check(&signer, &signer.proof(&payload)).unwrap_err();
            assert_eq!(refusal.check, expected, "{payload}");
            assert_eq!(refusal.kind().as_str(), "dpop-proof");
        }
        // The window edges hold, leeway both ways.
        for iat in [NOW + 5.0, NOW - 65.0] {
            let payload = claims("").replace(&format!("{NOW}"), &format!("{iat}"));
            assert!(check(&signer, &signer.proof(&payload)).is_ok(), "{iat}");
        }
    }

    #[test]
    fn header_rules_are_enforced() {
        let signer = p256();
        let body = claims("");
        let jwk = &signer.jwk;
        let cases = [
            (format!(r#"{{"typ":"JWT","alg":"ES256","jwk":{jwk}}}"#), Check::Type),
            (format!(r#"{{"alg":"ES256","jwk":{jwk}}}"#), Check::Type),
            (format!(r#"{{"typ":"dpop+jwt","alg":"HS256","jwk":{jwk}}}"#), Check::Algorithm),
            (format!(r#"{{"typ":"dpop+jwt","alg":"none","jwk":{jwk}}}"#), Check::Algorithm),
            (format!(r#"{{"typ":"dpop+jwt","alg":"ES384","jwk":{jwk}}}"#), Check::Key),
            (r#"{"typ":"dpop+jwt","alg":"ES256"}"#.to_owned(), Check::Key),
            (
                format!(r#"{{"typ":"dpop+jwt","alg":"ES256","jwk":{}}}"#, jwk.replace('}', r#","d":"AAAA"}"#)),
                Check::Key,
            ),
            (
                r#"{"typ":"dpop+jwt","alg":"ES256","jwk":{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}}"#.to_owned(),
                Check::Key,
            ),
            (
                format!(r#"{{"typ":"dpop+jwt","alg":"ES256","crit":["x"],"jwk":{jwk}}}"#),
                Check::Structure,
            ),
            (
                format!(r#"{{"typ":"dpop+jwt","typ":"dpop+jwt","alg":"ES256","jwk":{jwk}}}"#),
                Check::Structure,
            ),
        ];
        for (header, expected) in cases {
            let refusal = check(&signer, &signer.sign(&header, &body)).unwrap_err();
            assert_eq!(refusal.check, expected, "{header}");
        }
        // `application/dpop+jwt` and case differences name the same type.
        let header = format!(r#"{{"typ":"application/DPoP+JWT","alg":"ES256","jwk":{jwk}}}"#);
        assert!(check(&signer, &signer.sign(&header, &body)).is_ok());
    }

    #[test]
    fn signature_and_binding() {
        let signer = p256();
        let other = p256();
        // Signed by another key than the header's.
        let forged = other.sign(&signer.header(), &claims(""));
        assert_eq!(check(&signer, &forged).unwrap_err().check, Check::Signature);
        // A good proof by a key the token is not bound to.
        let refusal = verifier()
            .verify(
                &other.proof(&claims("")),
                "GET",
                URI,
                TOKEN,
                &signer.jkt(),
                NOW,
            )
            .unwrap_err();
        assert_eq!(refusal.check, Check::Binding);
        assert_eq!(refusal.kind().as_str(), "dpop-binding");
    }

    #[test]
    fn size_and_time_limits() {
        let signer = p256();
        let small = ProofVerifier::new(ProofOptions {
            max_size: 64,
            ..ProofOptions::default()
        })
        .unwrap();
        let refusal = small
            .verify(
                &signer.proof(&claims("")),
                "GET",
                URI,
                TOKEN,
                &signer.jkt(),
                NOW,
            )
            .unwrap_err();
        assert_eq!(refusal.error.kind(), ErrorKind::TooLarge);
        let refusal = verifier()
            .verify(
                &signer.proof(&claims("")),
                "GET",
                URI,
                TOKEN,
                &signer.jkt(),
                f64::NAN,
            )
            .unwrap_err();
        assert_eq!(refusal.check, Check::IssuedAt);
    }

    #[test]
    fn ed25519_proofs_and_small_order_keys() {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let jwk = format!(
            r#"{{"kty":"OKP","crv":"Ed25519","x":"{}"}}"#,
            token::encode(pair.public_key().as_ref())
        );
        let header = format!(r#"{{"typ":"dpop+jwt","alg":"EdDSA","jwk":{jwk}}}"#);
        let input = format!(
            "{}.{}",
            token::encode(header.as_bytes()),
            token::encode(claims("").as_bytes())
        );
        let proof = format!(
            "{input}.{}",
            token::encode(pair.sign(input.as_bytes()).as_ref())
        );
        let jkt = thumbprint(&Value::parse(jwk.as_bytes(), 8).unwrap()).unwrap();
        assert!(verifier()
            .verify(proof.as_bytes(), "GET", URI, TOKEN, &jkt, NOW)
            .is_ok());
        // The identity point: any signature would do, so the key is refused.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let bad = format!(
            r#"{{"typ":"dpop+jwt","alg":"EdDSA","jwk":{{"kty":"OKP","crv":"Ed25519","x":"{}"}}}}"#,
            token::encode(&identity)
        );
        let input = format!(
            "{}.{}",
            token::encode(bad.as_bytes()),
            token::encode(claims("").as_bytes())
        );
        let proof = format!("{input}.{}", token::encode(&[0u8; 64]));
        let refusal = verifier()
            .verify(proof.as_bytes(), "GET", URI, TOKEN, &jkt, NOW)
            .unwrap_err();
        assert_eq!(refusal.check, Check::Key);
    }

    #[test]
    fn hmac_cannot_be_allowed() {
        for algorithms in [vec!["HS256".to_owned()], vec![], vec!["none".to_owned()]] {
            assert!(ProofVerifier::new(ProofOptions {
                algorithms: Some(algorithms),
                ..ProofOptions::default()
            })
            .is_err());
        }
        let only_es = ProofVerifier::new(ProofOptions {
            algorithms: Some(vec!["ES256".to_owned()]),
            ..ProofOptions::default()
        })
        .unwrap();
        assert!(only_es.allows(Algorithm::ES256));
        assert!(!only_es.allows(Algorithm::RS256));
        assert!(!verifier().allows(Algorithm::HS256));
        assert!(verifier().allows(Algorithm::Ed25519));
    }

    #[test]
    fn rfc7638_example_thumbprint() {
        // RFC 7638 §3.1.
        let jwk = br#"{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}"#;
        let value = Value::parse(jwk, 8).unwrap();
        assert_eq!(
            thumbprint(&value).unwrap(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
        // Member order and extra members do not change it.
        let reordered = Value::parse(
            br#"{"e":"AQAB","kty":"RSA","use":"sig","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}"#,
            8,
        )
        .unwrap();
        assert_eq!(thumbprint(&reordered).unwrap(), thumbprint(&value).unwrap());
        let escaped = Value::parse(br#"{"kty":"RSA","n":"a\"b","e":"AQAB"}"#, 8).unwrap();
        assert!(thumbprint(&escaped).is_err());
    }

    #[test]
    fn htu_normalisation() {
        let same = [
            (
                "https://server.example.com/path",
                "https://server.example.com/path",
            ),
            (
                "HTTPS://Server.Example.COM/path",
                "https://server.example.com/path",
            ),
            (
                "https://server.example.com:443/path",
                "https://server.example.com/path",
            ),
            (
                "http://server.example.com:80/path",
                "http://server.example.com/path",
            ),
            ("https://server.example.com", "https://server.example.com/"),
            (
                "https://server.example.com:/path",
                "https://server.example.com/path",
            ),
            (
                "https://server.example.com/path?query=1#frag",
                "https://server.example.com/path",
            ),
            (
                "https://server.example.com/a/./b/../c",
                "https://server.example.com/a/c",
            ),
            (
                "https://server.example.com/%7euser/%2fx",
                "https://server.example.com/~user/%2Fx",
            ),
            ("https://[::1]:8443/x", "https://[::1]:8443/x"),
            (
                "https://server.example.com:0443/",
                "https://server.example.com/",
            ),
        ];
        for (input, expected) in same {
            assert_eq!(normalize_htu(input).as_deref(), Some(expected), "{input}");
        }
        let different = [
            (
                "https://server.example.com/Path",
                "https://server.example.com/path",
            ),
            (
                "http://server.example.com/path",
                "https://server.example.com/path",
            ),
            (
                "https://server.example.com:8443/path",
                "https://server.example.com/path",
            ),
            (
                "https://server.example.com/path/",
                "https://server.example.com/path",
            ),
        ];
        for (a, b) in different {
            assert_ne!(normalize_htu(a), normalize_htu(b), "{a} vs {b}");
        }
        for bad in [
            "",
            "/path",
            "ftp://server.example.com/",
            "https://user@server.example.com/",
            "https:///path",
            "https://server.example.com:99999/",
            "https://server.example.com:x/",
            "https://server.example.com/a b",
            "https://server.example.com/%zz",
            "https://server.example.com/%4",
            "https://[::1/",
            "https://server.example.com/\u{e9}",
        ] {
            assert_eq!(normalize_htu(bad), None, "{bad}");
        }
    }

    #[test]
    fn refusals_cross_with_their_dpop_kind_and_check() {
        let inner = Error::new(ErrorKind::TooLarge, "proof is too large")
            .detail("limit", Detail::Number(1.0));
        let proof: Error = Refusal::from(Check::Structure, inner).into();
        assert_eq!(proof.kind(), ErrorKind::DpopProof);
        assert_eq!(proof.kind().as_str(), "dpop-proof");
        assert_eq!(proof.message(), "proof is too large");
        assert_eq!(
            proof.context(),
            &[("check", Detail::Text("structure".to_owned()))]
        );
        let binding: Error =
            Refusal::new(Check::Binding, ErrorKind::Signature, "not the bound key").into();
        assert_eq!(binding.kind().as_str(), "dpop-binding");
        assert_eq!(
            binding.context(),
            &[("check", Detail::Text("jkt".to_owned()))]
        );
    }
}
