//! Verification keys, each parsed once and bound to one algorithm.
//!
//! Every refusal happens here, at build time: short HMAC secrets, RSA moduli
//! under 2048 bits, EC points off their curve, private keys where a public
//! one is expected, JWKs meant for encryption, key types that do not fit the
//! algorithm. A built [`Key`] is immutable and cheap to share.

use aws_lc_rs::digest;
use aws_lc_rs::hmac;
use aws_lc_rs::signature::ParsedPublicKey;

use crate::algorithm::{Algorithm, Family};
use crate::der;
use crate::error::{invalid_key, Error, ErrorKind, Result};
use crate::json::Value;
use crate::token;

/// Smallest RSA modulus accepted (bits).
pub const MIN_RSA_BITS: usize = 2048;
/// Largest RSA modulus accepted (bits).
pub const MAX_RSA_BITS: usize = 8192;

enum Material {
    Hmac(hmac::Key),
    Public(ParsedPublicKey),
}

/// A verification key bound to one algorithm.
pub struct Key {
    algorithm: Algorithm,
    kid: Option<String>,
    kty: &'static str,
    material: Material,
    /// SHA-256 over the algorithm and the key bytes: tells two keys apart
    /// without keeping or showing the bytes themselves.
    fingerprint: [u8; 32],
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("algorithm", &self.algorithm.name())
            .field("kid", &self.kid)
            .field("kty", &self.kty)
            .finish_non_exhaustive()
    }
}

fn fingerprint(algorithm: Algorithm, bytes: &[u8]) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(algorithm.name().as_bytes());
    ctx.update(&[0]);
    ctx.update(bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

fn check_kid(kid: Option<String>) -> Result<Option<String>> {
    match kid {
        Some(k) if k.is_empty() => Err(Error::new(ErrorKind::InvalidKey, "kid is empty")),
        other => Ok(other),
    }
}

/// Whether `bytes` is DER of a public key or certificate.
fn is_public_key_der(bytes: &[u8]) -> bool {
    bytes.first() == Some(&der::SEQUENCE)
        && (der::parse_spki(bytes).is_ok()
            || der::certificate_spki(bytes).is_ok()
            || der::rsa_components(bytes).is_ok())
}

/// Looks for a member named `kty` or `keys` at any depth, tolerating what a
/// strict parse refuses (duplicate members): a JWK with a duplicate member
/// is still a public key.
struct JwkFinder {
    found: bool,
}

impl crate::json::Builder for JwkFinder {
    type Value = ();
    type Key = ();
    type Object = ();

    fn null(&mut self) -> Result<()> {
        Ok(())
    }
    fn boolean(&mut self, _: bool) -> Result<()> {
        Ok(())
    }
    fn int(&mut self, _: i64) -> Result<()> {
        Ok(())
    }
    fn big_int(&mut self, _: &num_bigint::BigInt) -> Result<()> {
        Ok(())
    }
    fn float(&mut self, _: f64) -> Result<()> {
        Ok(())
    }
    fn string(&mut self, _: &str) -> Result<()> {
        Ok(())
    }
    fn array(&mut self, _: Vec<()>) -> Result<()> {
        Ok(())
    }
    fn key(&mut self, name: &str) -> Result<()> {
        self.found |= name == "kty" || name == "keys";
        Ok(())
    }
    fn object(&mut self) -> Result<()> {
        Ok(())
    }
    fn insert(&mut self, (): &mut (), (): (), (): ()) -> Result<bool> {
        Ok(true)
    }
    fn finish_object(&mut self, (): ()) -> Result<()> {
        Ok(())
    }
}

/// Whether text is (or looks like) a JWK, a JWKS or a list of JWKs: JSON
/// at any nesting depth, with duplicate members, or a Python `repr` of one.
fn is_jwk_text(text: &[u8]) -> bool {
    if !matches!(text.first(), Some(b'{' | b'[' | b'(')) {
        return false;
    }
    // The member name in plain text (JSON, a Python repr, YAML-ish dumps).
    if memchr::memmem::find(text, b"kty").is_some() {
        return true;
    }
    // Escaped member names (`"k\u0074y"`): a lenient parse finds them.
    let mut finder = JwkFinder { found: false };
    let _ = crate::json::document(text, &mut finder, 512);
    finder.found
}

/// An uncompressed EC point on a supported curve, with or without its
/// leading 0x04 (the raw `x || y` of a JWK). A random secret lands on a
/// curve with negligible probability, so this refuses no real secret.
fn is_raw_ec_point(bytes: &[u8]) -> bool {
    use aws_lc_rs::signature::{
        ECDSA_P256K1_SHA256_FIXED, ECDSA_P256_SHA256_FIXED, ECDSA_P384_SHA384_FIXED,
        ECDSA_P521_SHA512_FIXED,
    };
    let point: Vec<u8> = match bytes.len() {
        65 | 97 | 133 if bytes[0] == 0x04 => bytes.to_vec(),
        64 | 96 | 132 => [&[0x04], bytes].concat(),
        _ => return false,
    };
    let curves: &[&'static aws_lc_rs::signature::EcdsaVerificationAlgorithm] = match point.len() {
        65 => &[&ECDSA_P256_SHA256_FIXED, &ECDSA_P256K1_SHA256_FIXED],
        97 => &[&ECDSA_P384_SHA384_FIXED],
        _ => &[&ECDSA_P521_SHA512_FIXED],
    };
    curves
        .iter()
        .any(|curve| ParsedPublicKey::new(*curve, &point).is_ok())
}

/// The SSH wire form of a public key or certificate (RFC 4253 §6.6): a
/// length-prefixed key-type name such as `ssh-ed25519`.
fn is_ssh_blob(bytes: &[u8]) -> bool {
    let Some((length, rest)) = bytes.split_first_chunk::<4>() else {
        return false;
    };
    let length = u32::from_be_bytes(*length) as usize;
    (1..=64).contains(&length) && rest.len() > length && is_ssh_key_type(&rest[..length])
}

/// An OpenSSH key-type name: `ssh-rsa`, `ecdsa-sha2-nistp256`,
/// `ssh-ed25519-cert-v01@openssh.com`, `sk-ssh-ed25519@openssh.com`, ...
fn is_ssh_key_type(name: &[u8]) -> bool {
    const PREFIXES: [&[u8]; 6] = [
        b"ssh-",
        b"ecdsa-sha2-",
        b"sk-ssh-",
        b"sk-ecdsa-",
        b"rsa-sha2-",
        b"x509v3-",
    ];
    name.len() <= 64
        && PREFIXES.iter().any(|p| name.starts_with(p))
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'@' | b'.' | b'_'))
}

/// An OpenSSH public key or certificate line (`authorized_keys`,
/// `known_hosts`, `*.pub`, `*-cert.pub`), options and host names included:
/// some field names a key type, or is the base64 of an SSH key blob.
fn is_ssh_line(text: &[u8]) -> bool {
    let fields: Vec<&[u8]> = text
        .split(u8::is_ascii_whitespace)
        .filter(|f| !f.is_empty())
        .collect();
    fields.iter().enumerate().any(|(i, field)| {
        (is_ssh_key_type(field) && i + 1 < fields.len())
            || (field.starts_with(b"AAAA")
                && base64_simd::STANDARD
                    .decode_to_vec(field)
                    .is_ok_and(|blob| is_ssh_blob(&blob)))
    })
}

/// Hex text (any case, optional `:` or whitespace separators) decoded.
fn hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !(b.is_ascii_whitespace() || *b == b':'))
        .collect();
    if digits.len() < 2 || digits.len() % 2 != 0 {
        return None;
    }
    let value = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    digits
        .chunks_exact(2)
        .map(|pair| Some((value(pair[0])? << 4) | value(pair[1])?))
        .collect()
}

/// Binary forms of a public key: DER of a key or certificate, a raw EC
/// point, an SSH key blob.
fn is_public_key_binary(bytes: &[u8]) -> bool {
    is_public_key_der(bytes) || is_raw_ec_point(bytes) || is_ssh_blob(bytes)
}

/// A public key must never become an HMAC secret: anyone holding the public
/// key could then forge tokens. Refused: PEM (and RFC 4716 SSH) text, OpenSSH
/// public key and certificate lines, JWK/JWKS text (also after a BOM, with
/// duplicate members, nested deep, or as a Python `repr`), DER of a key or
/// certificate, a raw EC point, and the base64 (either alphabet, any
/// whitespace) or hex of those binary forms.
fn looks_like_asymmetric_key(secret: &[u8]) -> bool {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let unmarked = secret.strip_prefix(BOM).unwrap_or(secret);
    let trimmed = unmarked.trim_ascii();
    if memchr::memmem::find(secret, b"-----BEGIN").is_some()
        || memchr::memmem::find(secret, b"---- BEGIN SSH2").is_some()
    {
        return true;
    }
    if is_ssh_line(trimmed) || is_jwk_text(trimmed) || is_public_key_binary(secret) {
        return true;
    }
    if let Some(bytes) = hex_decode(trimmed) {
        if is_public_key_binary(&bytes) {
            return true;
        }
    }
    // Base64 of DER (how some identity providers display a key): normalise
    // the URL-safe alphabet, then decode forgivingly (whitespace, padding).
    let standard: Vec<u8> = trimmed
        .iter()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            other => *other,
        })
        .collect();
    base64_simd::forgiving_decode_to_vec(&standard).is_ok_and(|der| is_public_key_binary(&der))
}

/// Reads every PEM block, refusing the mistakes people make with PEM input
/// with a message that names the mistake (never quoting the input).
fn read_pem(data: &[u8]) -> Result<Vec<pem::Pem>> {
    let text = data.trim_ascii();
    let begins = memchr::memmem::find_iter(data, b"-----BEGIN").count();
    if begins == 0 {
        let looks_like_path = !text.is_empty()
            && text.len() < 4096
            && !text.contains(&b'\n')
            && (text.starts_with(b"/")
                || text.starts_with(b"./")
                || text.starts_with(b"~")
                || text.get(1..3) == Some(&b":\\"[..])
                || [".pem", ".crt", ".cer", ".key", ".pub"]
                    .iter()
                    .any(|ext| text.ends_with(ext.as_bytes())));
        return Err(invalid_key(if looks_like_path {
            "this looks like a file path, not PEM text: pass the file's contents \
             (for example Path(path).read_bytes())"
        } else {
            "not a PEM document (expected -----BEGIN PUBLIC KEY----- ...)"
        }));
    }
    if memchr::memmem::find(data, b"\\n").is_some() && !text.contains(&b'\n') {
        return Err(invalid_key(
            "the PEM holds literal \\n sequences instead of line breaks \
             (replace them with real newlines)",
        ));
    }
    let blocks = pem::parse_many(data).map_err(|_| invalid_key("not a valid PEM document"))?;
    if blocks.len() != begins {
        return Err(invalid_key(
            "the PEM holds a block that cannot be read (check its BEGIN/END lines and base64)",
        ));
    }
    for block in &blocks {
        let tag = block.tag();
        if tag.contains("PRIVATE KEY") {
            return Err(invalid_key(
                "a private key was given where a public key is expected \
                 (export the public key, e.g. openssl pkey -pubout)",
            ));
        }
        if tag.contains("CERTIFICATE REQUEST") {
            return Err(invalid_key(
                "a certificate signing request was given; pass the issued certificate \
                 or the public key",
            ));
        }
    }
    Ok(blocks)
}

/// Ed25519 public keys of small order (and their non-canonical encodings):
/// with such a key, a crafted signature verifies for any message. The same
/// blocklist idea as libsodium's.
const ED25519_SMALL_ORDER: [[u8; 32]; 14] = {
    const fn point(first: [u8; 4], middle: u8, last: u8) -> [u8; 32] {
        let mut out = [middle; 32];
        out[0] = first[0];
        out[1] = first[1];
        out[2] = first[2];
        out[3] = first[3];
        out[31] = last;
        out
    }
    const ORDER_8_A: [u8; 32] = [
        0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98,
        0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53,
        0xfc, 0x05,
    ];
    const ORDER_8_B: [u8; 32] = [
        0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67,
        0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac,
        0x03, 0x7a,
    ];
    const fn signed(mut p: [u8; 32]) -> [u8; 32] {
        p[31] |= 0x80;
        p
    }
    [
        point([0x01, 0, 0, 0], 0x00, 0x00),          // identity (y = 1)
        point([0x01, 0, 0, 0], 0x00, 0x80),          // identity, sign bit set
        point([0xec, 0xff, 0xff, 0xff], 0xff, 0x7f), // y = -1 (order 2)
        point([0xec, 0xff, 0xff, 0xff], 0xff, 0xff), // y = -1, sign bit set
        point([0x00, 0, 0, 0], 0x00, 0x00),          // y = 0 (order 4)
        point([0x00, 0, 0, 0], 0x00, 0x80),          // y = 0, other x
        ORDER_8_A,
        signed(ORDER_8_A),
        ORDER_8_B,
        signed(ORDER_8_B),
        point([0xed, 0xff, 0xff, 0xff], 0xff, 0x7f), // y = p (non-canonical 0)
        point([0xed, 0xff, 0xff, 0xff], 0xff, 0xff),
        point([0xee, 0xff, 0xff, 0xff], 0xff, 0x7f), // y = p + 1 (non-canonical 1)
        point([0xee, 0xff, 0xff, 0xff], 0xff, 0xff),
    ]
};

fn check_ed25519(point: &[u8]) -> Result<()> {
    if ED25519_SMALL_ORDER.iter().any(|bad| bad[..] == *point) {
        return Err(invalid_key(
            "Ed25519 public key has small order (any signature could verify)",
        ));
    }
    Ok(())
}

impl Key {
    /// An HMAC secret for HS256/384/512.
    pub fn secret(secret: &[u8], algorithm: Algorithm, kid: Option<String>) -> Result<Key> {
        let Some(hmac_alg) = algorithm.hmac_algorithm() else {
            return Err(Error::with(
                ErrorKind::InvalidKey,
                format!(
                    "a shared secret can only verify HS256/HS384/HS512, not {}",
                    algorithm.name()
                ),
            ));
        };
        if looks_like_asymmetric_key(secret) {
            return Err(invalid_key(
                "this secret is a public key (PEM, SSH, JWK or DER text, or a raw EC point): \
                 anyone holding it could forge tokens; load it with its public-key algorithm \
                 (Key.pem or Key.jwk) instead",
            ));
        }
        let minimum = algorithm.hmac_min_secret();
        if secret.len() < minimum {
            return Err(Error::with(
                ErrorKind::WeakKey,
                format!(
                    "{} needs a secret of at least {minimum} bytes, got {}",
                    algorithm.name(),
                    secret.len()
                ),
            ));
        }
        Ok(Key {
            algorithm,
            kid: check_kid(kid)?,
            kty: "oct",
            material: Material::Hmac(hmac::Key::new(hmac_alg, secret)),
            fingerprint: fingerprint(algorithm, secret),
        })
    }

    /// A public key in PEM: SPKI (`PUBLIC KEY`), PKCS#1 (`RSA PUBLIC KEY`)
    /// or an X.509 `CERTIFICATE` (its key is used; the certificate is not
    /// validated as a chain).
    pub fn pem(data: &[u8], algorithm: Algorithm, kid: Option<String>) -> Result<Key> {
        if algorithm.family() == Family::Hmac {
            return Err(invalid_key(
                "a PEM key cannot be used with HS256/HS384/HS512",
            ));
        }
        let blocks = read_pem(data)?;
        let block = &blocks[0];
        let contents = block.contents();
        let key = match block.tag() {
            "PUBLIC KEY" => Key::spki(contents, algorithm, kid),
            "CERTIFICATE" => Key::spki(der::certificate_spki(contents)?, algorithm, kid),
            "RSA PUBLIC KEY" => Key::rsa_pkcs1(contents, algorithm, kid),
            _ => Err(invalid_key(
                "unsupported PEM block (expected PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE)",
            )),
        }?;
        // Several blocks are accepted only as certificates of this same key
        // (a chain would name other keys; a key plus anything is ambiguous).
        for other in &blocks[1..] {
            let same = block.tag() == "CERTIFICATE"
                && other.tag() == "CERTIFICATE"
                && der::certificate_spki(other.contents()).is_ok_and(|spki| {
                    der::certificate_spki(contents).is_ok_and(|first| first == spki)
                });
            if !same {
                return Err(invalid_key(
                    "the PEM holds more than one block; pass exactly one public key \
                     (several blocks are accepted only as certificates of the same key)",
                ));
            }
        }
        Ok(key)
    }

    /// A DER SubjectPublicKeyInfo.
    pub fn spki(spki: &[u8], algorithm: Algorithm, kid: Option<String>) -> Result<Key> {
        let info = der::parse_spki(spki)?;
        let family = algorithm.family();
        match (info.algorithm, family) {
            (der::OID_RSA, Family::RsaPkcs1 | Family::RsaPss) => {
                Key::rsa_pkcs1(info.key, algorithm, kid)
            }
            (der::OID_EC, Family::Ecdsa) => {
                let expected = match algorithm {
                    Algorithm::ES256 => der::OID_P256,
                    Algorithm::ES384 => der::OID_P384,
                    Algorithm::ES512 => der::OID_P521,
                    _ => der::OID_SECP256K1,
                };
                if info.parameter != Some(expected) {
                    return Err(Error::with(
                        ErrorKind::InvalidKey,
                        format!("the EC key is not on the curve {} needs", algorithm.name()),
                    ));
                }
                Key::public(info.key, algorithm, kid, "EC")
            }
            (der::OID_ED25519, Family::Ed25519) => {
                check_ed25519(info.key)?;
                Key::public(info.key, algorithm, kid, "OKP")
            }
            (der::OID_RSA_PSS, _) => Err(invalid_key(
                "RSASSA-PSS-restricted key encodings are not supported; use an rsaEncryption key",
            )),
            (der::OID_RSA | der::OID_EC | der::OID_ED25519, _) => Err(Error::with(
                ErrorKind::InvalidKey,
                format!("this key type cannot verify {}", algorithm.name()),
            )),
            _ => Err(invalid_key("unsupported public key type")),
        }
    }

    fn rsa_pkcs1(pkcs1: &[u8], algorithm: Algorithm, kid: Option<String>) -> Result<Key> {
        if !matches!(algorithm.family(), Family::RsaPkcs1 | Family::RsaPss) {
            return Err(Error::with(
                ErrorKind::InvalidKey,
                format!("an RSA key cannot verify {}", algorithm.name()),
            ));
        }
        let (n, e) = der::rsa_components(pkcs1)?;
        check_rsa(n, e)?;
        Key::public(pkcs1, algorithm, kid, "RSA")
    }

    fn public(
        bytes: &[u8],
        algorithm: Algorithm,
        kid: Option<String>,
        kty: &'static str,
    ) -> Result<Key> {
        let verification = algorithm
            .verification()
            .ok_or_else(|| invalid_key("not a public-key algorithm"))?;
        let parsed = ParsedPublicKey::new(verification, bytes).map_err(|_| {
            Error::with(
                ErrorKind::InvalidKey,
                format!(
                    "the {kty} public key is invalid for {} (for EC: point not on the curve)",
                    algorithm.name()
                ),
            )
        })?;
        Ok(Key {
            algorithm,
            kid: check_kid(kid)?,
            kty,
            material: Material::Public(parsed),
            fingerprint: fingerprint(algorithm, bytes),
        })
    }

    /// One JWK (RFC 7517). `algorithm` must agree with the JWK's own `alg`
    /// when both are given; without either, RSA keys default to RS256 and
    /// EC/OKP keys follow their curve. Symmetric (`oct`) keys need
    /// `allow_symmetric`.
    pub fn jwk(jwk: &Value, algorithm: Option<Algorithm>, allow_symmetric: bool) -> Result<Key> {
        let Value::Object(_) = jwk else {
            return Err(invalid_key("a JWK must be a JSON object"));
        };
        let text = |name: &'static str| -> Result<Option<&str>> {
            match jwk.get(name) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(Error::with(
                    ErrorKind::InvalidKey,
                    format!("JWK member {name} is not a string"),
                )),
            }
        };
        let required = |name: &'static str| -> Result<Vec<u8>> {
            let value = text(name)?.ok_or_else(|| {
                Error::with(
                    ErrorKind::InvalidKey,
                    format!("JWK member {name} is missing"),
                )
            })?;
            token::decode(value.as_bytes()).map_err(|_| {
                Error::with(
                    ErrorKind::InvalidKey,
                    format!("JWK member {name} is not valid base64url"),
                )
            })
        };

        let kty = text("kty")?.ok_or_else(|| invalid_key("JWK has no kty"))?;
        if let Some(usage) = text("use")? {
            if usage != "sig" {
                return Err(invalid_key("JWK use is not sig"));
            }
        }
        if let Some(ops) = jwk.get("key_ops") {
            let Value::Array(items) = ops else {
                return Err(invalid_key("JWK key_ops is not an array"));
            };
            if !items.iter().any(|op| op.as_str() == Some("verify")) {
                return Err(invalid_key("JWK key_ops does not allow verify"));
            }
        }
        const PRIVATE: [&str; 7] = ["d", "p", "q", "dp", "dq", "qi", "oth"];
        if kty != "oct" && PRIVATE.iter().any(|m| jwk.get(m).is_some()) {
            return Err(invalid_key("JWK holds private key material"));
        }
        let kid = text("kid")?.map(str::to_owned);
        let declared = match text("alg")? {
            None => None,
            Some(name) => Some(
                Algorithm::from_name(name.as_bytes())
                    .ok_or_else(|| invalid_key("JWK alg is not a supported signature algorithm"))?,
            ),
        };
        let chosen = match (algorithm, declared) {
            (Some(wanted), Some(own)) if !wanted.accepts(own) => {
                return Err(Error::with(
                    ErrorKind::InvalidKey,
                    format!(
                        "JWK alg {} differs from the requested {}",
                        own.name(),
                        wanted.name()
                    ),
                ))
            }
            (Some(wanted), _) => Some(wanted),
            (None, own) => own,
        };

        match kty {
            "RSA" => {
                let algorithm = chosen.unwrap_or(Algorithm::RS256);
                let n = required("n")?;
                let e = required("e")?;
                Key::rsa_pkcs1(&der::rsa_public_key(&n, &e), algorithm, kid)
            }
            "EC" | "OKP" => {
                let crv = text("crv")?.ok_or_else(|| invalid_key("JWK has no crv"))?;
                let by_curve = Algorithm::for_curve(crv)
                    .ok_or_else(|| invalid_key("JWK curve is not supported"))?;
                let algorithm = chosen.unwrap_or(by_curve);
                if !by_curve.accepts(algorithm)
                    || (kty == "OKP") != (by_curve.family() == Family::Ed25519)
                {
                    return Err(Error::with(
                        ErrorKind::InvalidKey,
                        format!("a {kty} key on {crv} cannot verify {}", algorithm.name()),
                    ));
                }
                let x = required("x")?;
                if kty == "OKP" {
                    if x.len() != 32 {
                        return Err(invalid_key("Ed25519 JWK x must be 32 bytes"));
                    }
                    check_ed25519(&x)?;
                    return Key::public(&x, algorithm, kid, "OKP");
                }
                let y = required("y")?;
                let size = match by_curve {
                    Algorithm::ES384 => 48,
                    Algorithm::ES512 => 66,
                    _ => 32,
                };
                if x.len() != size || y.len() != size {
                    return Err(invalid_key("EC JWK coordinates have the wrong length"));
                }
                let mut point = Vec::with_capacity(1 + 2 * size);
                point.push(0x04);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                Key::public(&point, algorithm, kid, "EC")
            }
            "oct" => {
                if !allow_symmetric {
                    return Err(invalid_key(
                        "symmetric (oct) JWKs are refused unless explicitly allowed",
                    ));
                }
                let algorithm = chosen.ok_or_else(|| {
                    invalid_key("an oct JWK needs an alg (HS256, HS384 or HS512)")
                })?;
                let k = required("k")?;
                Key::secret(&k, algorithm, kid)
            }
            _ => Err(invalid_key("JWK kty is not supported")),
        }
    }

    /// Parses one JWK from JSON text.
    pub fn jwk_json(
        data: &[u8],
        algorithm: Option<Algorithm>,
        allow_symmetric: bool,
    ) -> Result<Key> {
        let value = Value::parse(data, 16).map_err(|_| invalid_key("JWK is not valid JSON"))?;
        Key::jwk(&value, algorithm, allow_symmetric)
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// `oct`, `RSA`, `EC` or `OKP`.
    pub fn kty(&self) -> &'static str {
        self.kty
    }

    pub fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }

    /// Whether two keys hold the same algorithm and key bytes.
    pub(crate) fn same_material(&self, other: &Key) -> bool {
        self.fingerprint == other.fingerprint
    }

    /// Checks `signature` over `message`. Failures say nothing but their kind.
    pub fn verify(&self, alg: Algorithm, message: &[u8], signature: &[u8]) -> Result<()> {
        const BAD: Error = Error::new(ErrorKind::Signature, "signature verification failed");
        match &self.material {
            Material::Hmac(key) => hmac::verify(key, message, signature).map_err(|_| BAD),
            Material::Public(key) => {
                if let Some(expected) = alg.fixed_signature_len() {
                    if signature.len() != expected {
                        return Err(BAD);
                    }
                }
                key.verify_sig(message, signature).map_err(|_| BAD)
            }
        }
    }
}

fn check_rsa(n: &[u8], e: &[u8]) -> Result<()> {
    let bits = der::bit_length(n);
    if bits < MIN_RSA_BITS {
        return Err(Error::with(
            ErrorKind::WeakKey,
            format!("RSA modulus is {bits} bits; at least {MIN_RSA_BITS} are required"),
        ));
    }
    if bits > MAX_RSA_BITS {
        return Err(Error::with(
            ErrorKind::InvalidKey,
            format!("RSA modulus is {bits} bits; at most {MAX_RSA_BITS} are supported"),
        ));
    }
    if n.last().is_some_and(|b| b & 1 == 0) {
        return Err(invalid_key("RSA modulus is even"));
    }
    // Exponents below 65537, even ones and ones over 2^33 are refused, as ring does.
    let value = if der::bit_length(e) <= 33 {
        e.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
    } else {
        0
    };
    if value < 65_537 || value & 1 == 0 {
        return Err(Error::new(
            ErrorKind::WeakKey,
            "RSA public exponent must be odd and between 65537 and 2^33",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_rules() {
        assert!(Key::secret(&[7; 32], Algorithm::HS256, None).is_ok());
        let short = Key::secret(&[7; 31], Algorithm::HS256, None).unwrap_err();
        assert_eq!(short.kind(), ErrorKind::WeakKey);
        assert!(!short.message().contains('\u{7}'));
        assert_eq!(
            Key::secret(&[7; 47], Algorithm::HS384, None)
                .unwrap_err()
                .kind(),
            ErrorKind::WeakKey
        );
        assert_eq!(
            Key::secret(&[7; 64], Algorithm::RS256, None)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidKey
        );
        let pem = b"-----BEGIN PUBLIC KEY-----\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PUBLIC KEY-----\n";
        assert_eq!(
            Key::secret(pem, Algorithm::HS256, None).unwrap_err().kind(),
            ErrorKind::InvalidKey
        );
        let jwk = br#"{"kty":"RSA","n":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","e":"AQAB"}"#;
        assert_eq!(
            Key::secret(jwk, Algorithm::HS256, None).unwrap_err().kind(),
            ErrorKind::InvalidKey
        );
        assert_eq!(
            Key::secret(&[7; 32], Algorithm::HS256, Some(String::new()))
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidKey
        );
    }

    #[test]
    fn hmac_verifies_and_rejects() {
        let key = Key::secret(&[1; 32], Algorithm::HS256, None).unwrap();
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &[1; 32]), b"msg");
        assert!(key.verify(Algorithm::HS256, b"msg", tag.as_ref()).is_ok());
        let err = key
            .verify(Algorithm::HS256, b"msh", tag.as_ref())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Signature);
        assert!(key
            .verify(Algorithm::HS256, b"msg", &tag.as_ref()[..16])
            .is_err());
    }

    #[test]
    fn rsa_exponent_and_size_rules() {
        let n2048 = {
            let mut n = vec![0xC5u8; 256];
            n[255] = 0x01;
            n
        };
        assert!(check_rsa(&n2048, &[0x01, 0x00, 0x01]).is_ok());
        assert_eq!(
            check_rsa(&n2048, &[0x03]).unwrap_err().kind(),
            ErrorKind::WeakKey
        );
        assert_eq!(
            check_rsa(&n2048, &[0x01, 0x00, 0x00]).unwrap_err().kind(),
            ErrorKind::WeakKey
        );
        assert_eq!(
            check_rsa(&n2048, &[0x01, 0x00, 0x02]).unwrap_err().kind(),
            ErrorKind::WeakKey
        );
        assert_eq!(
            check_rsa(&n2048[1..], &[0x01, 0x00, 0x01])
                .unwrap_err()
                .kind(),
            ErrorKind::WeakKey
        );
    }

    #[test]
    fn jwk_refusals() {
        let cases: [(&str, ErrorKind); 8] = [
            (
                r#"{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","alg":"HS256"}"#,
                ErrorKind::InvalidKey,
            ),
            (
                r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA","use":"enc"}"#,
                ErrorKind::InvalidKey,
            ),
            (
                r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA","key_ops":["sign"]}"#,
                ErrorKind::InvalidKey,
            ),
            (
                r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA","d":"AA"}"#,
                ErrorKind::InvalidKey,
            ),
            (r#"{"kty":"RSA","n":"AQAB","e":"AQAB"}"#, ErrorKind::WeakKey),
            (
                r#"{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}"#,
                ErrorKind::InvalidKey,
            ),
            (
                r#"{"kty":"OKP","crv":"X25519","x":"AA"}"#,
                ErrorKind::InvalidKey,
            ),
            (r#"{"kty":"XYZ"}"#, ErrorKind::InvalidKey),
        ];
        for (text, kind) in cases {
            let err = Key::jwk_json(text.as_bytes(), None, false).unwrap_err();
            assert_eq!(err.kind(), kind, "{text}");
        }
    }

    #[test]
    fn oct_jwk_with_opt_in() {
        let text = br#"{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","alg":"HS256","kid":"s"}"#;
        let key = Key::jwk_json(text, None, true).unwrap();
        assert_eq!(key.algorithm(), Algorithm::HS256);
        assert_eq!(key.kid(), Some("s"));
        assert_eq!(key.kty(), "oct");
    }

    #[test]
    fn public_key_forms_are_not_hmac_secrets() {
        // An Ed25519 SPKI (valid DER) in raw, base64 and base64url-with-newlines forms.
        let mut spki = vec![
            0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
        ];
        spki.extend_from_slice(&[0x11; 32]);
        let standard = base64_simd::STANDARD.encode_to_string(&spki);
        let wrapped = format!("{}\n{}\n", &standard[..20], &standard[20..]);
        let url = token::encode(&spki);
        let jwks = br#"{"keys":[{"kty":"oct","k":"AAAA"}]}"#.to_vec();
        for secret in [
            spki.clone(),
            standard.into_bytes(),
            wrapped.into_bytes(),
            url.into_bytes(),
            jwks,
        ] {
            let err = Key::secret(&secret, Algorithm::HS256, None).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidKey);
        }
        // Ordinary random-looking secrets stay accepted.
        assert!(Key::secret(b"0123456789abcdef0123456789abcdef", Algorithm::HS256, None).is_ok());
        assert!(Key::secret(&[0x30; 40], Algorithm::HS256, None).is_ok());
    }

    fn to_hex(bytes: &[u8]) -> String {
        use std::fmt::Write as _;
        bytes.iter().fold(String::new(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
    }

    fn ssh_blob(name: &str) -> Vec<u8> {
        let mut blob = (name.len() as u32).to_be_bytes().to_vec();
        blob.extend_from_slice(name.as_bytes());
        blob.extend_from_slice(&32u32.to_be_bytes());
        blob.extend_from_slice(&[0x42; 32]);
        blob
    }

    fn refused(secret: &[u8]) -> bool {
        Key::secret(secret, Algorithm::HS256, None)
            .is_err_and(|e| e.kind() == ErrorKind::InvalidKey && e.message().contains("public key"))
    }

    #[test]
    fn more_public_key_forms_are_not_hmac_secrets() {
        use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let n = token::encode(&[0xC5; 256]);
        let jwk = format!(r#"{{"kty":"RSA","n":"{n}","e":"AQAB"}}"#);
        // A JWK preceded by a UTF-8 byte order mark.
        assert!(refused(&[b"\xEF\xBB\xBF", jwk.as_bytes()].concat()));
        // A JWK with a duplicate member (a strict parse refuses it).
        let dup = format!(r#"{{"kty":"RSA","n":"{n}","e":"AQAB","e":"AQAB"}}"#);
        assert!(refused(dup.as_bytes()));
        // A JWK with an escaped member name.
        let escaped = format!(r#"{{"k\u0074y":"RSA","n":"{n}","e":"AQAB"}}"#);
        assert!(refused(escaped.as_bytes()));
        // A JWKS nested deeper than 8.
        let deep = format!(r#"{}{{"keys":[{jwk}]}}{}"#, "[".repeat(12), "]".repeat(12));
        assert!(refused(deep.as_bytes()));
        // The Python repr of a JWK dict.
        let repr = format!("{{'kty': 'RSA', 'n': '{n}', 'e': 'AQAB'}}");
        assert!(refused(repr.as_bytes()));
        // Hex-encoded DER (plain, upper case, colon-separated).
        let mut spki = vec![
            0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
        ];
        spki.extend_from_slice(&[0x11; 32]);
        let hex = to_hex(&spki);
        assert!(refused(hex.as_bytes()));
        assert!(refused(hex.to_uppercase().as_bytes()));
        let colons: Vec<String> = spki.iter().map(|b| format!("{b:02X}")).collect();
        assert!(refused(colons.join(":").as_bytes()));
        // OpenSSH public keys and certificate lines, with options and comments.
        let b64 = |blob: &[u8]| base64_simd::STANDARD.encode_to_string(blob);
        for (name, line) in [
            ("ssh-ed25519", "{name} {blob} user@host"),
            ("ssh-rsa", "from=\"10.0.0.1\",no-pty {name} {blob} deploy"),
            ("ssh-dss", "{name} {blob}"),
            ("ecdsa-sha2-nistp256", "host.example.com {name} {blob}"),
            (
                "ssh-ed25519-cert-v01@openssh.com",
                "{name} {blob} user@host",
            ),
            (
                "ssh-rsa-cert-v01@openssh.com",
                "cert-authority {name} {blob}",
            ),
            ("sk-ssh-ed25519@openssh.com", "{name} {blob}"),
        ] {
            let text = line
                .replace("{name}", name)
                .replace("{blob}", &b64(&ssh_blob(name)));
            assert!(refused(text.as_bytes()), "{text}");
            // The base64 blob alone, too.
            assert!(refused(b64(&ssh_blob(name)).as_bytes()), "{name}");
        }
        assert!(refused(
            b"---- BEGIN SSH2 PUBLIC KEY ----\nAAAA\n---- END SSH2 PUBLIC KEY ----"
        ));
        // A raw EC point: uncompressed, without its 0x04, in base64 and hex.
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = pair.public_key().as_ref().to_vec();
        assert_eq!(point.len(), 65);
        assert!(refused(&point));
        assert!(refused(&point[1..]));
        assert!(refused(token::encode(&point).as_bytes()));
        let hex = to_hex(&point);
        assert!(refused(hex.as_bytes()));
        // Ordinary secrets of the same shapes stay accepted.
        assert!(!refused(&[0x04; 65]));
        assert!(!refused(&[0x5A; 64]));
        assert!(!refused(b"{just a long secret with braces in it}"));
        assert!(!refused(b"ssh-this-is-my-secret-and-it-is-long"));
        assert!(!refused("0123456789abcdef".repeat(4).as_bytes()));
    }

    #[test]
    fn pem_mistakes_are_named() {
        let message = |data: &[u8]| {
            Key::pem(data, Algorithm::RS256, None)
                .unwrap_err()
                .message()
                .to_owned()
        };
        assert!(message(b"/etc/keys/public.pem").contains("file path"));
        assert!(message(b"keys/public.pem").contains("file path"));
        assert!(
            message(b"-----BEGIN PUBLIC KEY-----\\nMIIB\\n-----END PUBLIC KEY-----")
                .contains("literal")
        );
        assert!(
            message(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
                .contains("private key")
        );
        assert!(message(
            b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"
        )
        .contains("signing request"));
        assert!(message(b"hello").contains("not a PEM document"));
    }

    #[test]
    fn small_order_ed25519_keys_are_refused() {
        for point in ED25519_SMALL_ORDER {
            let jwk = format!(
                r#"{{"kty":"OKP","crv":"Ed25519","x":"{}"}}"#,
                token::encode(&point)
            );
            let err = Key::jwk_json(jwk.as_bytes(), None, false).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidKey);
            let mut spki = vec![
                0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
            ];
            spki.extend_from_slice(&point);
            assert_eq!(
                Key::spki(&spki, Algorithm::EdDSA, None).unwrap_err().kind(),
                ErrorKind::InvalidKey
            );
        }
        // RFC 8032 §7.1, test 1: an ordinary public key still builds.
        let rfc8032: [u8; 32] = [
            0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64,
            0x07, 0x3a, 0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68,
            0xf7, 0x07, 0x51, 0x1a,
        ];
        let jwk = format!(
            r#"{{"kty":"OKP","crv":"Ed25519","x":"{}"}}"#,
            token::encode(&rfc8032)
        );
        assert!(Key::jwk_json(jwk.as_bytes(), None, false).is_ok());
    }

    #[test]
    fn ec_point_off_curve_is_refused() {
        let x = token::encode(&[1u8; 32]);
        let y = token::encode(&[2u8; 32]);
        let text = format!(r#"{{"kty":"EC","crv":"P-256","x":"{x}","y":"{y}"}}"#);
        let err = Key::jwk_json(text.as_bytes(), None, false).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidKey);
    }
}
