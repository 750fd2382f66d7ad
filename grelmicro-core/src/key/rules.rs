//! Every refusal rule for key material, in one reviewable place.
//!
//! A key is refused when it is built, never when it verifies: a public key
//! offered as an HMAC secret (in any of the forms people paste), short
//! secrets, PEM mistakes (file paths, literal `\\n`, private keys, signing
//! requests), RSA moduli and exponents out of range, EC keys off their
//! curve or on the wrong one, small-order Ed25519 points, JWKs meant for
//! encryption or holding private members, an empty `kid`. The parsers in
//! [`super`] and [`super::jwk`] call these and nothing else refuses.

use super::{forms, Curve, KeyType, Sha2};
use crate::algorithm::{Algorithm, Family};
use crate::der;
use crate::error::{invalid_key, Error, ErrorKind, Result};
use crate::json::Value;

/// Smallest RSA modulus accepted (bits).
pub const MIN_RSA_BITS: usize = 2048;
/// Largest RSA modulus accepted (bits).
pub const MAX_RSA_BITS: usize = 8192;

pub(super) fn check_kid(kid: Option<String>) -> Result<Option<String>> {
    match kid {
        Some(k) if k.is_empty() => Err(Error::new(ErrorKind::InvalidKey, "kid is empty")),
        other => Ok(other),
    }
}

// --- HMAC secrets: long enough, and never a public key ----------------------
/// The rules for an HMAC secret: an HMAC algorithm, not a public key in any
/// form, at least as long as the hash output. Gives the HMAC algorithm.
pub(super) fn check_secret(secret: &[u8], algorithm: Algorithm) -> Result<Sha2> {
    let Some(hash) = algorithm.hmac_hash() else {
        return Err(Error::with(
            ErrorKind::InvalidKey,
            format!(
                "a shared secret can only verify HS256/HS384/HS512, not {}",
                algorithm.name()
            ),
        ));
    };
    if forms::is_public_key(secret) {
        return Err(invalid_key(
            "this secret is a public key (PEM, SSH, JWK or DER text, or a raw EC point): \
             anyone holding it could forge tokens; load it with its public-key algorithm \
             (Key.pem or Key.jwk) instead",
        ));
    }
    if let Some(what) = forms::public_member_text(secret) {
        return Err(Error::with(
            ErrorKind::InvalidKey,
            format!(
                "this secret reads as {what}: public key material is no secret, anyone \
                 holding the JWKS could forge tokens; load the key with Key.jwk instead \
                 (if it is a random secret of yours, draw a new one: it took the shape \
                 of public key material by chance)"
            ),
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
    Ok(hash)
}

// --- PEM ---------------------------------------------------------------------

/// Reads every PEM block, refusing the mistakes people make with PEM input
/// with a message that names the mistake (never quoting the input).
pub(super) fn read_pem(data: &[u8]) -> Result<Vec<pem::Pem>> {
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

// --- Ed25519 ----------------------------------------------------------------

/// Ed25519 public keys of small order (and their non-canonical encodings):
/// with such a key, a crafted signature verifies for any message. The same
/// blocklist idea as libsodium's.
pub(super) const ED25519_SMALL_ORDER: [[u8; 32]; 14] = {
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

pub(super) fn check_ed25519(point: &[u8]) -> Result<()> {
    if ED25519_SMALL_ORDER.iter().any(|bad| bad[..] == *point) {
        return Err(invalid_key(
            "Ed25519 public key has small order (any signature could verify)",
        ));
    }
    Ok(())
}

// --- curves and key types ----------------------------------------------------

/// An SPKI's algorithm OID and curve parameter must fit `algorithm`; gives
/// the key type it is read as.
pub(super) fn check_spki(info: &der::Spki<'_>, algorithm: Algorithm) -> Result<KeyType> {
    let wrong_type = || {
        Error::with(
            ErrorKind::InvalidKey,
            format!("this key type cannot verify {}", algorithm.name()),
        )
    };
    match info.algorithm {
        der::OID_RSA if matches!(algorithm.family(), Family::RsaPkcs1 | Family::RsaPss) => {
            Ok(KeyType::Rsa)
        }
        der::OID_EC => match Curve::for_algorithm(algorithm) {
            Some(curve) if curve.key_type() == KeyType::Ec => {
                if info.parameter != Some(curve.oid()) {
                    return Err(Error::with(
                        ErrorKind::InvalidKey,
                        format!("the EC key is not on the curve {} needs", algorithm.name()),
                    ));
                }
                Ok(KeyType::Ec)
            }
            _ => Err(wrong_type()),
        },
        der::OID_ED25519 if Curve::for_algorithm(algorithm) == Some(Curve::Ed25519) => {
            check_ed25519(info.key)?;
            Ok(KeyType::Okp)
        }
        der::OID_ML_DSA_44 | der::OID_ML_DSA_65 | der::OID_ML_DSA_87 => {
            let own = match info.algorithm {
                der::OID_ML_DSA_44 => Algorithm::MlDsa44,
                der::OID_ML_DSA_65 => Algorithm::MlDsa65,
                _ => Algorithm::MlDsa87,
            };
            if own != algorithm {
                return Err(Error::with(
                    ErrorKind::InvalidKey,
                    format!("an {} key cannot verify {}", own.name(), algorithm.name()),
                ));
            }
            if info.parameter.is_some() {
                return Err(invalid_key("an ML-DSA SPKI must have no parameters"));
            }
            check_mldsa_public(info.key, algorithm)?;
            Ok(KeyType::Akp)
        }
        der::OID_RSA_PSS => Err(invalid_key(
            "RSASSA-PSS-restricted key encodings are not supported; use an rsaEncryption key",
        )),
        der::OID_RSA | der::OID_ED25519 => Err(wrong_type()),
        _ => Err(invalid_key("unsupported public key type")),
    }
}

/// A JWK's `kty` and `crv` must name a supported curve that verifies
/// `algorithm` (`None`: the curve's own algorithm); gives the curve.
pub(super) fn check_jwk_curve(
    kty: KeyType,
    crv: &str,
    algorithm: Option<Algorithm>,
) -> Result<(Curve, Algorithm)> {
    let curve = Curve::from_jwk(crv).ok_or_else(|| invalid_key("JWK curve is not supported"))?;
    let algorithm = algorithm.unwrap_or(curve.algorithm());
    if !curve.algorithm().accepts(algorithm) || curve.key_type() != kty {
        return Err(Error::with(
            ErrorKind::InvalidKey,
            format!(
                "a {} key on {crv} cannot verify {}",
                kty.as_str(),
                algorithm.name()
            ),
        ));
    }
    Ok((curve, algorithm))
}

/// The raw key of an OKP (Ed25519) JWK: 32 bytes, not of small order.
pub(super) fn check_okp(x: &[u8]) -> Result<()> {
    if x.len() != Curve::Ed25519.coordinate_len() {
        return Err(invalid_key("Ed25519 JWK x must be 32 bytes"));
    }
    check_ed25519(x)
}

/// The uncompressed point (`0x04 || x || y`) of an EC JWK on `curve`.
/// Coordinates shorter than the curve size are left-padded with zeros (the
/// same integers; some libraries strip leading zero bytes): the flag says
/// so. Longer ones, or empty ones, are refused.
pub(super) fn ec_point(curve: Curve, x: &[u8], y: &[u8]) -> Result<(Vec<u8>, bool)> {
    let size = curve.coordinate_len();
    if x.is_empty() || y.is_empty() || x.len() > size || y.len() > size {
        return Err(invalid_key("EC JWK coordinates have the wrong length"));
    }
    let mut point = vec![0u8; 1 + 2 * size];
    point[0] = 0x04;
    point[1 + size - x.len()..=size].copy_from_slice(x);
    point[1 + 2 * size - y.len()..].copy_from_slice(y);
    Ok((point, x.len() < size || y.len() < size))
}

// --- JWK members --------------------------------------------------------------

/// Whether a JWK of type `kty` holds a private member (a symmetric key is
/// its secret, so `oct` never does).
pub(super) fn holds_private_member(jwk: &Value, kty: Option<KeyType>) -> bool {
    // `priv`: the private key of an AKP (ML-DSA) JWK (RFC 9964).
    const PRIVATE: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "priv"];
    kty != Some(KeyType::Oct) && PRIVATE.iter().any(|m| jwk.get(m).is_some())
}

/// A JWK must be meant for signatures (`use`, `key_ops`) and, unless it is
/// a symmetric key, hold no private member.
pub(super) fn check_jwk_members(
    jwk: &Value,
    kty: Option<KeyType>,
    usage: Option<&str>,
) -> Result<()> {
    if let Some(usage) = usage {
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
    if holds_private_member(jwk, kty) {
        return Err(invalid_key("JWK holds private key material"));
    }
    Ok(())
}

/// A JWK's own `alg` must agree with the requested one (the two Ed25519
/// names are one); gives the algorithm to use, if either names one.
pub(super) fn check_jwk_alg(
    requested: Option<Algorithm>,
    declared: Option<&str>,
) -> Result<Option<Algorithm>> {
    let declared = match declared {
        None => None,
        Some(name) => Some(
            Algorithm::from_name(name.as_bytes())
                .ok_or_else(|| invalid_key("JWK alg is not a supported signature algorithm"))?,
        ),
    };
    match (requested, declared) {
        (Some(wanted), Some(own)) if !wanted.accepts(own) => Err(Error::with(
            ErrorKind::InvalidKey,
            format!(
                "JWK alg {} differs from the requested {}",
                own.name(),
                wanted.name()
            ),
        )),
        (Some(wanted), _) => Ok(Some(wanted)),
        (None, own) => Ok(own),
    }
}

// --- ML-DSA (AKP) -------------------------------------------------------------

/// An `AKP` JWK names its algorithm itself (`alg` is required, RFC 9964),
/// and that algorithm is an ML-DSA one; a requested algorithm must be the
/// same one (checked before by [`check_jwk_alg`]). Gives the algorithm.
pub(super) fn check_akp_alg(
    declared: Option<&str>,
    chosen: Option<Algorithm>,
) -> Result<Algorithm> {
    let Some(declared) = declared else {
        return Err(invalid_key(
            "an AKP JWK needs its alg (ML-DSA-44, ML-DSA-65 or ML-DSA-87; RFC 9964)",
        ));
    };
    match (Algorithm::from_name(declared.as_bytes()), chosen) {
        (Some(own), Some(wanted)) if own == wanted && own.family() == Family::MlDsa => Ok(own),
        (Some(own), _) if own.family() != Family::MlDsa => Err(Error::with(
            ErrorKind::InvalidKey,
            format!("an AKP key cannot verify {}", own.name()),
        )),
        _ => Err(invalid_key(
            "AKP JWK alg differs from the requested algorithm",
        )),
    }
}

/// An ML-DSA public key is the raw FIPS 204 encoding of exactly its
/// parameter set's length (checked before any parsing).
pub(super) fn check_mldsa_public(key: &[u8], algorithm: Algorithm) -> Result<()> {
    let Some(expected) = algorithm.mldsa_public_key_len() else {
        return Err(Error::with(
            ErrorKind::InvalidKey,
            format!("an ML-DSA key cannot verify {}", algorithm.name()),
        ));
    };
    if key.len() != expected {
        return Err(Error::with(
            ErrorKind::InvalidKey,
            format!(
                "an {} public key is {expected} bytes, got {}",
                algorithm.name(),
                key.len()
            ),
        ));
    }
    Ok(())
}

// --- RSA ---------------------------------------------------------------------

pub(super) fn check_rsa(n: &[u8], e: &[u8]) -> Result<()> {
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
