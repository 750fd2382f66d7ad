//! The little DER this crate needs: find the SubjectPublicKeyInfo inside an
//! X.509 certificate, read an SPKI's algorithm, read and write an RSA public
//! key. aws-lc-rs does the real key parsing and validation afterwards.

use crate::error::{invalid_key, Result};

pub const SEQUENCE: u8 = 0x30;
pub const INTEGER: u8 = 0x02;
pub const BIT_STRING: u8 = 0x03;
pub const OID: u8 = 0x06;
const CONTEXT_0: u8 = 0xA0;

pub const OID_RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01];
pub const OID_RSA_PSS: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0A];
pub const OID_EC: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
pub const OID_P256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
pub const OID_P384: &[u8] = &[0x2B, 0x81, 0x04, 0x00, 0x22];
pub const OID_P521: &[u8] = &[0x2B, 0x81, 0x04, 0x00, 0x23];
pub const OID_SECP256K1: &[u8] = &[0x2B, 0x81, 0x04, 0x00, 0x0A];
pub const OID_ED25519: &[u8] = &[0x2B, 0x65, 0x70];
/// id-ml-dsa-44/65/87 (2.16.840.1.101.3.4.3.17-19, RFC 9881): no parameters.
pub const OID_ML_DSA_44: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x11];
pub const OID_ML_DSA_65: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x12];
pub const OID_ML_DSA_87: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x13];

/// A forward-only reader over DER elements.
pub struct Reader<'a> {
    data: &'a [u8],
}

/// One element: its tag, its contents, and the whole encoding.
pub struct Element<'a> {
    pub tag: u8,
    pub contents: &'a [u8],
    pub encoded: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn peek_tag(&self) -> Option<u8> {
        self.data.first().copied()
    }

    /// Reads the next element (definite lengths only, at most 4 length bytes).
    pub fn next(&mut self) -> Result<Element<'a>> {
        let bad = || invalid_key("malformed DER");
        let (&tag, rest) = self.data.split_first().ok_or_else(bad)?;
        let (&first, mut rest) = rest.split_first().ok_or_else(bad)?;
        let length = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7F);
            if count == 0 || count > 4 || rest.len() < count {
                return Err(bad());
            }
            let mut length = 0usize;
            for byte in &rest[..count] {
                length = (length << 8) | usize::from(*byte);
            }
            rest = &rest[count..];
            length
        };
        if rest.len() < length {
            return Err(bad());
        }
        let header_len = self.data.len() - rest.len();
        let encoded = &self.data[..header_len + length];
        let contents = &rest[..length];
        self.data = &rest[length..];
        Ok(Element {
            tag,
            contents,
            encoded,
        })
    }

    /// Reads the next element and checks its tag.
    pub fn expect(&mut self, tag: u8) -> Result<Element<'a>> {
        let element = self.next()?;
        if element.tag == tag {
            Ok(element)
        } else {
            Err(invalid_key("unexpected DER structure"))
        }
    }
}

/// Returns the SubjectPublicKeyInfo (whole encoding) of an X.509 certificate.
pub fn certificate_spki(cert: &[u8]) -> Result<&[u8]> {
    let certificate = Reader::new(cert).expect(SEQUENCE)?;
    let tbs = Reader::new(certificate.contents).expect(SEQUENCE)?;
    let mut fields = Reader::new(tbs.contents);
    if fields.peek_tag() == Some(CONTEXT_0) {
        fields.next()?; // version
    }
    fields.expect(INTEGER)?; // serialNumber
    fields.expect(SEQUENCE)?; // signature
    fields.expect(SEQUENCE)?; // issuer
    fields.expect(SEQUENCE)?; // validity
    fields.expect(SEQUENCE)?; // subject
    Ok(fields.expect(SEQUENCE)?.encoded)
}

/// An SPKI split into algorithm OID, optional parameter OID and key bits.
pub struct Spki<'a> {
    pub algorithm: &'a [u8],
    pub parameter: Option<&'a [u8]>,
    pub key: &'a [u8],
}

pub fn parse_spki(spki: &[u8]) -> Result<Spki<'_>> {
    let mut outer = Reader::new(spki);
    let info = outer.expect(SEQUENCE)?;
    if !outer.is_empty() {
        return Err(invalid_key("trailing data after the public key"));
    }
    let mut parts = Reader::new(info.contents);
    let mut algorithm = Reader::new(parts.expect(SEQUENCE)?.contents);
    let oid = algorithm.expect(OID)?.contents;
    let parameter = match algorithm.peek_tag() {
        Some(OID) => Some(algorithm.next()?.contents),
        _ => None,
    };
    let bits = parts.expect(BIT_STRING)?.contents;
    let (&unused, key) = bits
        .split_first()
        .ok_or_else(|| invalid_key("empty public key"))?;
    if unused != 0 {
        return Err(invalid_key("malformed public key bit string"));
    }
    Ok(Spki {
        algorithm: oid,
        parameter,
        key,
    })
}

/// The modulus and exponent of a PKCS#1 `RSAPublicKey`, leading zeros removed.
pub fn rsa_components(pkcs1: &[u8]) -> Result<(&[u8], &[u8])> {
    let mut outer = Reader::new(pkcs1);
    let mut fields = Reader::new(outer.expect(SEQUENCE)?.contents);
    let n = fields.expect(INTEGER)?.contents;
    let e = fields.expect(INTEGER)?.contents;
    if !fields.is_empty() || !outer.is_empty() {
        return Err(invalid_key("malformed RSA public key"));
    }
    Ok((strip_zeros(n), strip_zeros(e)))
}

fn strip_zeros(mut bytes: &[u8]) -> &[u8] {
    while let [0, rest @ ..] = bytes {
        bytes = rest;
    }
    bytes
}

/// Size in bits of a big-endian unsigned integer without leading zeros.
pub fn bit_length(bytes: &[u8]) -> usize {
    match bytes.first() {
        None => 0,
        Some(first) => bytes.len() * 8 - first.leading_zeros() as usize,
    }
}

fn write_length(out: &mut Vec<u8>, length: usize) {
    if length < 0x80 {
        out.push(length as u8);
    } else {
        let bytes = length.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

fn write_unsigned(out: &mut Vec<u8>, value: &[u8]) {
    let value = strip_zeros(value);
    let pad = value.first().is_none_or(|b| b & 0x80 != 0);
    out.push(INTEGER);
    write_length(out, value.len() + usize::from(pad));
    if pad {
        out.push(0);
    }
    out.extend_from_slice(value);
}

/// Encodes a PKCS#1 `RSAPublicKey` from big-endian `n` and `e`.
pub fn rsa_public_key(n: &[u8], e: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(n.len() + e.len() + 16);
    write_unsigned(&mut body, n);
    write_unsigned(&mut body, e);
    let mut out = Vec::with_capacity(body.len() + 6);
    out.push(SEQUENCE);
    write_length(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_key_round_trips() {
        let n = [0x80u8; 256];
        let der = rsa_public_key(&n, &[0x01, 0x00, 0x01]);
        let (rn, re) = rsa_components(&der).unwrap();
        assert_eq!(rn, n);
        assert_eq!(re, [0x01, 0x00, 0x01]);
        assert_eq!(bit_length(rn), 2048);
        assert_eq!(bit_length(&[0x01, 0x00]), 9);
        assert_eq!(bit_length(&[]), 0);
    }

    #[test]
    fn refuses_truncated_input() {
        assert!(Reader::new(&[0x30, 0x05, 0x01]).next().is_err());
        assert!(Reader::new(&[0x30, 0x80]).next().is_err());
        assert!(Reader::new(&[0x30]).next().is_err());
        assert!(certificate_spki(&[0x30, 0x00]).is_err());
        assert!(parse_spki(&[0x30, 0x00]).is_err());
    }
}
