//! Verification keys, each parsed once and bound to one algorithm.
//!
//! Every refusal happens at build time, and every refusal rule lives in
//! [`rules`]: short HMAC secrets, public keys offered as secrets, RSA moduli
//! under 2048 bits, EC points off their curve, private keys where a public
//! one is expected, JWKs meant for encryption, key types that do not fit the
//! algorithm. JWK parsing is in [`jwk`]. A built [`Key`] is immutable and
//! cheap to share.

use aws_lc_rs::digest;
use aws_lc_rs::signature::ParsedPublicKey;

use crate::algorithm::{Algorithm, Family};
use crate::der;
use crate::error::{invalid_key, Error, ErrorKind, Result};

mod forms;
mod jwk;
mod mac;
#[cfg(test)]
mod mldsa_tests;
mod rules;
#[cfg(test)]
mod tests;

pub(crate) use crate::digest::Sha2;
pub use rules::{MAX_RSA_BITS, MIN_RSA_BITS};

/// The JWK key type (`kty`, RFC 7518 §6.1) a key has, whatever form it came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// A shared secret.
    Oct,
    Rsa,
    Ec,
    /// An octet key pair (here, Ed25519; RFC 8037).
    Okp,
    /// An algorithm key pair (here, ML-DSA; RFC 9964): bound to one
    /// algorithm by its required `alg`.
    Akp,
}

impl KeyType {
    /// The JWK name: `oct`, `RSA`, `EC`, `OKP` or `AKP`.
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyType::Oct => "oct",
            KeyType::Rsa => "RSA",
            KeyType::Ec => "EC",
            KeyType::Okp => "OKP",
            KeyType::Akp => "AKP",
        }
    }

    /// Parses a JWK `kty` (exact, case-sensitive).
    pub fn from_jwk(name: &str) -> Option<KeyType> {
        Some(match name {
            "oct" => KeyType::Oct,
            "RSA" => KeyType::Rsa,
            "EC" => KeyType::Ec,
            "OKP" => KeyType::Okp,
            "AKP" => KeyType::Akp,
            _ => return None,
        })
    }
}

/// The curves a public key may sit on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Curve {
    P256,
    P384,
    P521,
    Secp256k1,
    Ed25519,
}

impl Curve {
    /// Parses a JWK `crv` (exact, case-sensitive).
    pub fn from_jwk(name: &str) -> Option<Curve> {
        Some(match name {
            "P-256" => Curve::P256,
            "P-384" => Curve::P384,
            "P-521" => Curve::P521,
            "secp256k1" => Curve::Secp256k1,
            "Ed25519" => Curve::Ed25519,
            _ => return None,
        })
    }

    /// The curve a key bound to `algorithm` must sit on (`None`: RSA or HMAC).
    pub const fn for_algorithm(algorithm: Algorithm) -> Option<Curve> {
        match algorithm {
            Algorithm::ES256 => Some(Curve::P256),
            Algorithm::ES384 => Some(Curve::P384),
            Algorithm::ES512 => Some(Curve::P521),
            Algorithm::ES256K => Some(Curve::Secp256k1),
            Algorithm::EdDSA | Algorithm::Ed25519 => Some(Curve::Ed25519),
            _ => None,
        }
    }

    /// The algorithm a key on this curve verifies when none is named.
    pub const fn algorithm(self) -> Algorithm {
        match self {
            Curve::P256 => Algorithm::ES256,
            Curve::P384 => Algorithm::ES384,
            Curve::P521 => Algorithm::ES512,
            Curve::Secp256k1 => Algorithm::ES256K,
            Curve::Ed25519 => Algorithm::EdDSA,
        }
    }

    pub const fn key_type(self) -> KeyType {
        match self {
            Curve::Ed25519 => KeyType::Okp,
            _ => KeyType::Ec,
        }
    }

    /// Length of one coordinate (EC) or of the public key (Ed25519), in bytes.
    pub const fn coordinate_len(self) -> usize {
        match self {
            Curve::P384 => 48,
            Curve::P521 => 66,
            _ => 32,
        }
    }

    /// The OID naming the curve in an SPKI (for Ed25519, the key algorithm).
    pub(crate) const fn oid(self) -> &'static [u8] {
        match self {
            Curve::P256 => der::OID_P256,
            Curve::P384 => der::OID_P384,
            Curve::P521 => der::OID_P521,
            Curve::Secp256k1 => der::OID_SECP256K1,
            Curve::Ed25519 => der::OID_ED25519,
        }
    }
}

enum Material {
    Hmac(mac::MacKey),
    Public(ParsedPublicKey),
}

/// A verification key bound to one algorithm.
pub struct Key {
    algorithm: Algorithm,
    kid: Option<String>,
    kty: KeyType,
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
            .field("kty", &self.kty.as_str())
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

impl Key {
    /// An HMAC secret for HS256/384/512.
    pub fn secret(secret: &[u8], algorithm: Algorithm, kid: Option<String>) -> Result<Key> {
        let hash = rules::check_secret(secret, algorithm)?;
        Ok(Key {
            algorithm,
            kid: rules::check_kid(kid)?,
            kty: KeyType::Oct,
            material: Material::Hmac(mac::MacKey::new(hash, secret)),
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
        let blocks = rules::read_pem(data)?;
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
        match rules::check_spki(&info, algorithm)? {
            KeyType::Rsa => Key::rsa_pkcs1(info.key, algorithm, kid),
            kty => Key::public(info.key, algorithm, kid, kty),
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
        rules::check_rsa(n, e)?;
        Key::public(pkcs1, algorithm, kid, KeyType::Rsa)
    }

    fn public(
        bytes: &[u8],
        algorithm: Algorithm,
        kid: Option<String>,
        kty: KeyType,
    ) -> Result<Key> {
        let verification = algorithm
            .verification()
            .ok_or_else(|| invalid_key("not a public-key algorithm"))?;
        let parsed = ParsedPublicKey::new(verification, bytes).map_err(|_| {
            Error::with(
                ErrorKind::InvalidKey,
                format!(
                    "the {} public key is invalid for {} (for EC: point not on the curve)",
                    kty.as_str(),
                    algorithm.name()
                ),
            )
        })?;
        Ok(Key {
            algorithm,
            kid: rules::check_kid(kid)?,
            kty,
            material: Material::Public(parsed),
            fingerprint: fingerprint(algorithm, bytes),
        })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    pub fn kty(&self) -> KeyType {
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
            Material::Hmac(key) if key.verify(message, signature) => Ok(()),
            Material::Hmac(_) => Err(BAD),
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
