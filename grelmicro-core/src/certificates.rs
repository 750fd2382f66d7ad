//! The X.509 form of a key set: an object of `kid` to a PEM certificate.
//!
//! Google publishes the keys of its service accounts this way beside their
//! JWKS (`https://www.googleapis.com/robot/v1/metadata/x509/<account>`), and
//! Firebase Authentication documents that URL for `securetoken` ID tokens.
//! A document of this shape is read wherever a JWKS is
//! ([`crate::keyset::KeySet::from_jwks`]): it is told apart by its shape,
//! since a JWKS always has a `keys` array (RFC 7517 §5). Only the
//! certificate's public key is used (the little DER of [`crate::der`]); the
//! certificate is not validated as a chain and its dates are not read: the
//! document's origin is what is trusted, as for a JWKS.

use crate::algorithm::Algorithm;
use crate::der;
use crate::error::{invalid_key, Result};
use crate::json::Value;
use crate::key::Key;

/// The members of `root` when it has the X.509 form: an object without
/// `keys` whose members are all strings, one at least holding a PEM block
/// (the others are skipped one by one, as unusable JWKS entries are).
pub(crate) fn certificate_map(root: &Value) -> Option<&[(String, Value)]> {
    let Value::Object(members) = root else {
        return None;
    };
    let strings = members
        .iter()
        .all(|(name, value)| name != "keys" && value.as_str().is_some());
    let some_pem = members.iter().any(|(_, value)| {
        value
            .as_str()
            .is_some_and(|text| text.contains("-----BEGIN "))
    });
    (strings && some_pem).then_some(members.as_slice())
}

/// The key of one PEM certificate under `kid`, bound to the algorithm its
/// key type implies: RS256 for RSA (what providers publishing this form
/// sign with), ES256/ES384/ES512 by the EC curve, EdDSA for Ed25519.
pub(crate) fn certificate_key(kid: &str, text: &str) -> Result<Key> {
    let block = pem::parse(text.as_bytes())
        .map_err(|_| invalid_key("the entry is not one well-formed PEM block"))?;
    if block.tag() != "CERTIFICATE" {
        return Err(invalid_key("the entry is not a PEM CERTIFICATE"));
    }
    let spki = der::certificate_spki(block.contents())?;
    let info = der::parse_spki(spki)?;
    let algorithm = match (info.algorithm, info.parameter) {
        (der::OID_RSA, _) => Algorithm::RS256,
        (der::OID_EC, Some(der::OID_P256)) => Algorithm::ES256,
        (der::OID_EC, Some(der::OID_P384)) => Algorithm::ES384,
        (der::OID_EC, Some(der::OID_P521)) => Algorithm::ES512,
        (der::OID_ED25519, _) => Algorithm::EdDSA,
        _ => return Err(invalid_key("the certificate's key type is not supported")),
    };
    Key::pem(text.as_bytes(), algorithm, Some(kid.to_owned()))
}

#[cfg(test)]
mod tests;
