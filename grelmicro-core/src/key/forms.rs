//! Recognising a public key in the forms people paste where a secret goes.
//!
//! A public key must never become an HMAC secret: anyone holding the
//! public key could then forge tokens. [`is_public_key`] is what the secret
//! rule in [`super::rules`] asks; it refuses no real (random) secret.

use aws_lc_rs::signature::ParsedPublicKey;

use super::KeyType;
use crate::der;
use crate::json::SkipBuilder;

/// Whether `bytes` is DER of a public key or certificate.
fn is_public_key_der(bytes: &[u8]) -> bool {
    bytes.first() == Some(&der::SEQUENCE)
        && (der::parse_spki(bytes).is_ok()
            || der::certificate_spki(bytes).is_ok()
            || der::rsa_components(bytes).is_ok())
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
    // A lenient walk: a JWK with a duplicate member is still a public key.
    let mut found = false;
    let _ = crate::json::document(
        text,
        &mut SkipBuilder::lenient(|name: &str| found |= name == "kty" || name == "keys"),
        512,
    );
    found
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

/// The DER SEQUENCE at the start of `bytes` (tag, length and contents),
/// without whatever follows it; `None` when it is not one or does not fit.
fn der_sequence(bytes: &[u8]) -> Option<&[u8]> {
    let [der::SEQUENCE, first, rest @ ..] = bytes else {
        return None;
    };
    let (length, header) = if *first < 0x80 {
        (usize::from(*first), 2)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (length, 2 + count)
    };
    bytes.get(..header.checked_add(length)?)
}

/// Base64 text read leniently: both alphabets, every other character
/// (punctuation, quotes, whitespace, padding, armour words' non-alphabet
/// parts) skipped, the first `skip` alphabet characters dropped (a stray
/// leading `-`), a trailing partial group dropped.
fn lenient_base64(text: &[u8], skip: usize) -> Vec<u8> {
    let sextet = |b: u8| -> Option<u32> {
        let value = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        Some(u32::from(value))
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for value in text.iter().filter_map(|b| sextet(*b)).skip(skip) {
        acc = (acc << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Base64 of a public key's DER that picked up stray characters on the way
/// (a `:` or `.`, a leading `-`, quotes, a trailing character): read
/// leniently at each alignment, the DER found at one of the first bytes.
/// A random secret decodes to a well-formed SPKI, PKCS#1 key or certificate
/// with negligible probability, so this refuses no real secret.
fn is_mangled_base64_der(text: &[u8]) -> bool {
    // Line breaks escaped as in a JSON or shell string (`\n`): the `n` is
    // a base64 letter, so the escapes go first.
    let unescaped: Vec<u8>;
    let text = if memchr::memchr(b'\\', text).is_some() {
        unescaped = unescape_breaks(text);
        &unescaped
    } else {
        text
    };
    (0..4).any(|skip| {
        let bytes = lenient_base64(text, skip);
        (0..bytes.len().min(3)).any(|start| {
            der_sequence(&bytes[start..]).is_some_and(|der| der.len() > 2 && is_public_key_der(der))
        })
    })
}

/// `text` without the escaped line breaks `\n`, `\r` and `\t`.
fn unescape_breaks(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.iter().copied().peekable();
    while let Some(byte) = bytes.next() {
        if byte == b'\\' && matches!(bytes.peek(), Some(b'n' | b'r' | b't')) {
            bytes.next();
            continue;
        }
        out.push(byte);
    }
    out
}

/// PEM (or RFC 4716) armour in any case and with any run of dashes: a
/// `BEGIN` or `END` after dashes, then a label naming a key or certificate.
fn has_armour(text: &[u8]) -> bool {
    let lower = text.to_ascii_lowercase();
    if memchr::memmem::find(&lower, b"-----begin").is_some()
        || memchr::memmem::find(&lower, b"-----end").is_some()
    {
        return true;
    }
    let armour_line = |word: &[u8]| {
        memchr::memmem::find_iter(&lower, word).any(|at| {
            let rest = &lower[at + word.len()..];
            let label = &rest[..rest
                .iter()
                .position(|b| matches!(b, b'-' | b'\n'))
                .unwrap_or(rest.len())];
            lower[..at].trim_ascii_end().ends_with(b"--")
                && label.first().is_some_and(u8::is_ascii_whitespace)
                && (memchr::memmem::find(label, b"key").is_some()
                    || memchr::memmem::find(label, b"certificate").is_some())
        })
    };
    armour_line(b"begin") || armour_line(b"end")
}

/// `text` without the whitespace, quotes and punctuation a copy and paste
/// wraps around a value.
fn unwrapped(text: &[u8]) -> &[u8] {
    const WRAPPING: &[u8] = b"\"'`,;:.<>";
    let start = text
        .iter()
        .position(|b| !(b.is_ascii_whitespace() || WRAPPING.contains(b)))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|b| !(b.is_ascii_whitespace() || WRAPPING.contains(b)))
        .map_or(start, |i| i + 1);
    &text[start..end.max(start)]
}

/// The odd primes below 2^16, for [`is_rsa_modulus`]'s trial division.
fn small_primes() -> &'static [u32] {
    static PRIMES: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    PRIMES.get_or_init(|| {
        const LIMIT: usize = 1 << 16;
        let mut composite = vec![false; LIMIT];
        let mut primes = Vec::with_capacity(6542);
        for n in 3..LIMIT {
            if n % 2 == 1 && !composite[n] {
                primes.push(n as u32);
                for multiple in (n * n..LIMIT).step_by(2 * n) {
                    composite[multiple] = true;
                }
            }
        }
        primes
    })
}

/// Whether `bytes` (big-endian) has the shape of an RSA modulus as a JWK's
/// `n` carries it: 2048 to 8192 bits, the top bit of its first byte set (a
/// modulus of exactly that many bytes), odd, and no prime factor below
/// 2^16. A random number of that size passes with probability about 1/40
/// (half are odd, half have the top bit set, and a tenth of the odd ones
/// have no small factor), so a random secret of 256 bytes or more given as
/// text is refused that often: the message asks for another one.
fn is_rsa_modulus(bytes: &[u8]) -> bool {
    if !(256..=1024).contains(&bytes.len())
        || bytes[0] & 0x80 == 0
        || bytes.last().is_some_and(|b| b & 1 == 0)
    {
        return false;
    }
    small_primes().iter().all(|&p| {
        let p = u64::from(p);
        bytes
            .iter()
            .fold(0u64, |rest, b| ((rest << 8) | u64::from(*b)) % p)
            != 0
    })
}

/// What a public JWK member's bare text decodes to, when it is one: the
/// `pub` of an ML-DSA key (its exact length) or an RSA `n` (its shape).
fn public_member(bytes: &[u8]) -> Option<&'static str> {
    const MLDSA: [usize; 3] = [1312, 1952, 2592];
    if MLDSA.contains(&bytes.len()) {
        return Some("an ML-DSA public key (a JWK's pub)");
    }
    is_rsa_modulus(bytes).then_some("an RSA modulus (a JWK's n)")
}

/// Text that is the bare value of a public JWK member (`n` of an RSA key,
/// `pub` of an ML-DSA key) in base64url (a JWK's form), standard base64 or
/// hex: what the text is, or `None`. An EC or Ed25519 `x` alone cannot be
/// told from a random secret of its length (any 32 bytes may be one); the
/// raw `x || y` point is refused by [`is_public_key`].
pub(super) fn public_member_text(secret: &[u8]) -> Option<&'static str> {
    let text = unwrapped(secret.trim_ascii());
    let base64 = text
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'/' | b'='));
    if base64 && text.len() >= 340 {
        let standard: Vec<u8> = text
            .iter()
            .map(|b| match b {
                b'-' => b'+',
                b'_' => b'/',
                other => *other,
            })
            .collect();
        if let Ok(bytes) = base64_simd::forgiving_decode_to_vec(&standard) {
            if let Some(what) = public_member(&bytes) {
                return Some(what);
            }
        }
    }
    hex_decode(text).and_then(|bytes| public_member(&bytes))
}

/// A public key must never become an HMAC secret: anyone holding the public
/// key could then forge tokens. Refused: PEM (and RFC 4716 SSH) armour in
/// any case, OpenSSH public key and certificate lines, JWK/JWKS text (also
/// after a BOM, with duplicate members, nested deep, as a Python `repr`, or
/// wrapped in quotes), DER of a key or certificate (also followed by stray
/// bytes), a raw EC point, the hex of those binary forms, and their base64
/// (either alphabet, any whitespace, and with stray punctuation, quotes or
/// a leading `-` mixed in).
pub(super) fn is_public_key(secret: &[u8]) -> bool {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let unmarked = secret.strip_prefix(BOM).unwrap_or(secret);
    let trimmed = unmarked.trim_ascii();
    let inner = unwrapped(trimmed);
    if has_armour(secret) {
        return true;
    }
    if [trimmed, inner]
        .iter()
        .any(|text| is_ssh_line(text) || is_jwk_text(text))
        || is_public_key_binary(secret)
        || der_sequence(secret).is_some_and(is_public_key_der)
    {
        return true;
    }
    if [trimmed, inner]
        .iter()
        .filter_map(|text| hex_decode(text))
        .any(|bytes| is_public_key_binary(&bytes))
    {
        return true;
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
        || is_mangled_base64_der(unmarked)
}

/// The texts a public key's members are shown as, each a candidate
/// HMAC secret that must never be accepted beside that key: the members
/// (RSA `n` and `e`, EC `x` and `y`, the OKP `x`, the AKP `pub`) and the
/// whole key bytes, raw, in base64url (with and without padding), standard
/// base64 (with and without padding) and hex (both cases).
pub(super) fn member_texts(bytes: &[u8], kty: KeyType) -> Vec<Vec<u8>> {
    let mut members: Vec<&[u8]> = vec![bytes];
    match kty {
        KeyType::Rsa => {
            if let Ok((n, e)) = der::rsa_components(bytes) {
                members.extend([n, e]);
            }
        }
        KeyType::Ec => {
            if let Some(coordinates) = bytes.strip_prefix(&[0x04]) {
                let (x, y) = coordinates.split_at(coordinates.len() / 2);
                members.extend([x, y]);
            }
        }
        KeyType::Okp | KeyType::Akp | KeyType::Oct => {}
    }
    let mut texts = Vec::with_capacity(members.len() * 7);
    for member in members {
        let url = base64_simd::URL_SAFE_NO_PAD.encode_to_string(member);
        let url_padded = base64_simd::URL_SAFE.encode_to_string(member);
        let standard = base64_simd::STANDARD.encode_to_string(member);
        let standard_bare = base64_simd::STANDARD_NO_PAD.encode_to_string(member);
        let hex = to_hex(member);
        texts.push(member.to_vec());
        texts.push(without_leading_zeros(member).to_vec());
        for text in [url, url_padded, standard, standard_bare] {
            texts.push(text.into_bytes());
        }
        texts.push(hex.to_ascii_uppercase().into_bytes());
        texts.push(hex.into_bytes());
    }
    texts.sort();
    texts.dedup();
    texts
}

/// Lower-case hex of `bytes`.
fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The bytes a secret could stand for, once decoded the ways a user could
/// have applied to public key text (issue 38, D5 by meaning): the secret
/// itself; with whitespace (line wrapping) and quotes removed; base64 in
/// either alphabet, padded or not; hex (an OpenSSL `Modulus=` line, a `0x`
/// prefix, colon-separated pairs, an odd digit count); a decimal integer.
/// Each reading is also taken without its leading zero bytes, as
/// [`member_texts`] lists each raw member, so an integer compares by value.
pub(super) fn secret_readings(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut readings = vec![secret.to_vec()];
    let compact: Vec<u8> = secret
        .iter()
        .copied()
        .filter(|b| !(b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`')))
        .collect();
    let mut body: &[u8] = &compact;
    for prefix in [&b"modulus="[..], &b"0x"[..]] {
        if body.len() > prefix.len() && body[..prefix.len()].eq_ignore_ascii_case(prefix) {
            body = &body[prefix.len()..];
        }
    }
    let hex: Vec<u8> = body.iter().copied().filter(|b| *b != b':').collect();
    if !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit) {
        let mut even = if hex.len() % 2 == 1 {
            vec![b'0']
        } else {
            Vec::new()
        };
        even.extend_from_slice(&hex);
        readings.extend(hex_decode(&even));
    }
    if !body.is_empty() && body.iter().all(u8::is_ascii_digit) {
        readings.push(decimal_bytes(body));
    }
    let standard: Vec<u8> = body
        .iter()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            other => *other,
        })
        .collect();
    if let Ok(bytes) = base64_simd::forgiving_decode_to_vec(&standard) {
        readings.push(bytes);
    }
    readings.push(compact);
    let stripped: Vec<Vec<u8>> = readings
        .iter()
        .map(|r| without_leading_zeros(r).to_vec())
        .collect();
    readings.extend(stripped);
    readings.retain(|r| !r.is_empty());
    readings.sort();
    readings.dedup();
    readings
}

fn without_leading_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

/// The big-endian bytes of a decimal integer (ASCII digits only).
fn decimal_bytes(digits: &[u8]) -> Vec<u8> {
    // Little-endian base-256 limbs, multiplied by ten and added to per digit.
    let mut limbs: Vec<u8> = Vec::with_capacity(digits.len() / 2 + 1);
    for digit in digits {
        let mut carry = u32::from(digit - b'0');
        for limb in &mut limbs {
            let value = u32::from(*limb) * 10 + carry;
            *limb = (value & 0xff) as u8;
            carry = value >> 8;
        }
        while carry > 0 {
            limbs.push((carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    limbs.reverse();
    limbs
}

#[cfg(test)]
mod reading_tests {
    use super::{decimal_bytes, secret_readings};

    #[test]
    fn decimal_integers_read_as_their_big_endian_bytes() {
        assert_eq!(decimal_bytes(b"0"), Vec::<u8>::new());
        assert_eq!(decimal_bytes(b"255"), vec![0xff]);
        assert_eq!(decimal_bytes(b"65537"), vec![0x01, 0x00, 0x01]);
        assert_eq!(
            decimal_bytes(b"18446744073709551616"),
            vec![1, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn a_secret_reads_through_hex_base64_and_wrapping() {
        let value = vec![0x01, 0x00, 0x01];
        for text in [
            &b"Modulus=010001"[..],
            b"0x10001",
            b"01:00:01",
            b"65537",
            b"AQAB",
            b"AQ\nAB",
        ] {
            assert!(secret_readings(text).contains(&value), "{text:?}");
        }
        assert!(secret_readings(b"\0\0\x01").contains(&vec![1]));
    }
}
