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

use crate::algorithm::{Algorithm, AlgorithmSet, Family};
use crate::der;
use crate::error::{invalid_key, Error, ErrorKind, RefusedBy, Result};

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

/// A verification key, bound to one algorithm, or to its key type's family
/// when a JWK names no `alg` (see [`Key::algorithms`]).
pub struct Key {
    /// The algorithm the key is bound to; for a family key, the family's
    /// conservative default (RS256, HS256), the only one it verifies when
    /// the verifier is given no `algorithms`.
    algorithm: Algorithm,
    /// For a key of a JWK without `alg`: every algorithm of its family it
    /// can verify, among which a verifier's `algorithms` choose.
    family: Option<AlgorithmSet>,
    kid: Option<String>,
    kty: KeyType,
    /// One parsed form per algorithm the key verifies (one, unless a family key).
    material: Box<[(Algorithm, Material)]>,
    /// EC coordinates shorter than the curve size were left-padded.
    padded: bool,
    /// SHA-256 over the algorithm (or family) and the key bytes: tells two
    /// keys apart without keeping or showing the bytes themselves.
    fingerprint: [u8; 32],
    /// SHA-256 over the key type and the key bytes alone: the same key
    /// material, whatever algorithms it is bound to.
    material_id: [u8; 32],
    /// For a public key: the `material_id` each public member (RSA `n` and
    /// `e`, EC `x` and `y`, the OKP `x`, the AKP `pub`, the whole key) would
    /// have as an HMAC secret, in every text form a JWKS or a tool shows it
    /// (see [`forms::member_texts`]). A key set withdraws a secret found
    /// here: anyone holding the public key could forge tokens with it.
    member_ids: Box<[[u8; 32]]>,
    /// For an HMAC secret: the `material_id` of every reading of it
    /// ([`forms::secret_readings`]: the secret decoded as base64, hex,
    /// decimal, unwrapped), compared with other keys' `member_ids` and kids.
    reading_ids: Box<[[u8; 32]]>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("algorithm", &self.algorithm.name())
            .field("family", &self.family.is_some())
            .field("kid", &self.kid)
            .field("kty", &self.kty.as_str())
            .finish_non_exhaustive()
    }
}

fn fingerprint(label: &str, bytes: &[u8]) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(label.as_bytes());
    ctx.update(&[0]);
    ctx.update(bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The RSA algorithms an RSA key without `alg` may verify.
const RSA_FAMILY: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// The HMAC algorithms an `oct` key without `alg` may verify (each needs a
/// secret at least as long as its hash output).
const HMAC_FAMILY: [Algorithm; 3] = [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];

impl Key {
    /// An HMAC secret for HS256/384/512.
    pub fn secret(secret: &[u8], algorithm: Algorithm, kid: Option<String>) -> Result<Key> {
        let hash = rules::check_secret(secret, algorithm)?;
        Ok(Key {
            algorithm,
            family: None,
            kid: rules::check_kid(kid)?,
            kty: KeyType::Oct,
            material: Box::new([(algorithm, Material::Hmac(mac::MacKey::new(hash, secret)))]),
            padded: false,
            fingerprint: fingerprint(algorithm.name(), secret),
            material_id: fingerprint(KeyType::Oct.as_str(), secret),
            member_ids: Box::new([]),
            reading_ids: forms::secret_readings(secret)
                .iter()
                .map(|reading| fingerprint(KeyType::Oct.as_str(), reading))
                .collect(),
        })
    }

    /// A secret of an `oct` JWK without `alg`: HS256, and HS384/HS512 when
    /// the secret is long enough for them; a verifier's `algorithms` choose.
    pub(super) fn secret_family(secret: &[u8], kid: Option<String>) -> Result<Key> {
        // HS256's rules (never a public key, at least 32 bytes) gate the key.
        let mut key = Key::secret(secret, Algorithm::HS256, kid)?;
        let mut material = Vec::with_capacity(HMAC_FAMILY.len());
        for algorithm in HMAC_FAMILY {
            if let Ok(hash) = rules::check_secret(secret, algorithm) {
                material.push((algorithm, Material::Hmac(mac::MacKey::new(hash, secret))));
            }
        }
        key.family = Some(material.iter().map(|(a, _)| *a).collect());
        key.material = material.into_boxed_slice();
        key.fingerprint = key.material_id;
        Ok(key)
    }

    /// An RSA key of a JWK without `alg`: RS256/384/512 and PS256/384/512,
    /// among which a verifier's `algorithms` choose (RS256 without them).
    /// The RSA size and exponent rules hold for every one of them.
    pub(super) fn rsa_family(pkcs1: &[u8], kid: Option<String>) -> Result<Key> {
        let mut key = Key::rsa_pkcs1(pkcs1, Algorithm::RS256, kid)?;
        let mut material = Vec::with_capacity(RSA_FAMILY.len());
        for algorithm in RSA_FAMILY {
            let verification = algorithm
                .verification()
                .ok_or_else(|| invalid_key("not a public-key algorithm"))?;
            let parsed = ParsedPublicKey::new(verification, pkcs1)
                .map_err(|_| invalid_key("the RSA public key is invalid"))?;
            material.push((algorithm, Material::Public(parsed)));
        }
        key.family = Some(RSA_FAMILY.into_iter().collect());
        key.material = material.into_boxed_slice();
        key.fingerprint = key.material_id;
        Ok(key)
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
            family: None,
            kid: rules::check_kid(kid)?,
            kty,
            material: Box::new([(algorithm, Material::Public(parsed))]),
            padded: false,
            fingerprint: fingerprint(algorithm.name(), bytes),
            material_id: fingerprint(kty.as_str(), bytes),
            member_ids: forms::member_texts(bytes, kty)
                .iter()
                .map(|text| fingerprint(KeyType::Oct.as_str(), text))
                .collect(),
            reading_ids: Box::new([]),
        })
    }

    /// The algorithm the key is bound to; for a key of a JWK without `alg`,
    /// its family's default (RS256 or HS256).
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Every algorithm the key can verify: its own (with the other name of
    /// Ed25519), or its whole family for a key of a JWK without `alg`.
    pub fn algorithms(&self) -> AlgorithmSet {
        self.family
            .unwrap_or_else(|| AlgorithmSet::accepted_by(self.algorithm))
    }

    /// Whether the key came from a JWK without `alg` (bound to a family).
    pub fn is_family(&self) -> bool {
        self.family.is_some()
    }

    /// Whether the key verifies tokens under `alg`. `chosen`: the verifier
    /// was given `algorithms`, which then choose within a family key's
    /// family; without them a family key verifies its default alone.
    pub fn serves(&self, alg: Algorithm, chosen: bool) -> bool {
        match self.family {
            Some(family) if chosen => family.contains(alg),
            _ => self.algorithm.accepts(alg),
        }
    }

    /// Whether EC coordinates shorter than the curve size were left-padded.
    pub fn padded(&self) -> bool {
        self.padded
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

    /// Whether this HMAC secret, in any reading of it, is a public member of
    /// `public` or `public`'s kid (never for two public keys).
    pub(crate) fn secret_is_member_of(&self, public: &Key) -> bool {
        if self.kty != KeyType::Oct {
            return false;
        }
        // A kid travels in every token's header: no secret either.
        let kid = public
            .kid()
            .map(|kid| fingerprint(KeyType::Oct.as_str(), kid.as_bytes()));
        self.reading_ids
            .iter()
            .any(|id| public.member_ids.contains(id) || kid.as_ref() == Some(id))
    }

    /// Whether two keys are one: the same key bytes, and the algorithms of
    /// one include the other's (a key of a JWK without `alg` and the same
    /// key bound to one of its family's algorithms; Ed25519 under either
    /// name). The same bytes bound to two different algorithms are not.
    pub(crate) fn same_material(&self, other: &Key) -> bool {
        if self.fingerprint == other.fingerprint {
            return true;
        }
        let (mine, theirs) = (self.algorithms(), other.algorithms());
        let common = mine.intersection(theirs);
        self.material_id == other.material_id && (common == mine || common == theirs)
    }

    /// Checks `signature` over `message`. Failures say nothing but their kind.
    pub fn verify(&self, alg: Algorithm, message: &[u8], signature: &[u8]) -> Result<()> {
        const BAD: Error = Error::new(ErrorKind::Signature, "signature verification failed");
        let Some((_, material)) = self.material.iter().find(|(own, _)| own.accepts(alg)) else {
            return Err(alg.refused(
                RefusedBy::Keys,
                format!("the key does not serve {}, the token's alg", alg.name()),
            ));
        };
        match material {
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
