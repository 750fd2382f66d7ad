//! Compact JWS parsing: three base64url segments, nothing else.

use std::mem::MaybeUninit;

use base64_simd::{Out, URL_SAFE_NO_PAD};

use crate::error::{malformed, Error, ErrorKind, Result};

/// The three encoded segments of a compact JWS, borrowed from the token.
#[derive(Clone, Copy, Debug)]
pub struct Segments<'a> {
    /// `header "." payload`: the bytes the signature covers.
    pub signing_input: &'a [u8],
    pub header: &'a [u8],
    pub payload: &'a [u8],
    pub signature: &'a [u8],
}

/// The refusal of a token over the size cap.
#[cold]
pub fn too_large(length: usize, max_size: usize) -> Error {
    Error::with(
        ErrorKind::TooLarge,
        format!("token is {length} bytes, over the limit of {max_size}"),
    )
}

/// Splits a compact JWS, refusing anything that is not exactly three
/// non-empty segments within `max_size` bytes.
pub fn split(token: &[u8], max_size: usize) -> Result<Segments<'_>> {
    if token.len() > max_size {
        return Err(too_large(token.len(), max_size));
    }
    if token.is_empty() {
        return Err(malformed("token is empty"));
    }
    let three = || malformed("a compact JWS has exactly three segments");
    let first = memchr::memchr(b'.', token).ok_or_else(three)?;
    let second = first + 1 + memchr::memchr(b'.', &token[first + 1..]).ok_or_else(three)?;
    // The signature holds no dot; the rest is counted only on the way out,
    // to tell a five-segment JWE from a mangled token.
    let rest = &token[second + 1..];
    if memchr::memchr(b'.', rest).is_some() {
        return Err(match memchr::memchr_iter(b'.', rest).count() {
            2 => Error::new(
                ErrorKind::Unsupported,
                "encrypted tokens (JWE) are not accepted",
            ),
            _ => three(),
        });
    }
    let header = &token[..first];
    let payload = &token[first + 1..second];
    let signature = &token[second + 1..];
    if header.is_empty() || payload.is_empty() {
        return Err(malformed("empty token segment"));
    }
    if signature.is_empty() {
        return Err(Error::new(
            ErrorKind::Malformed,
            "token has no signature (unsecured tokens are refused)",
        ));
    }
    Ok(Segments {
        signing_input: &token[..second],
        header,
        payload,
        signature,
    })
}

/// A refusal of a token in a recognisable wrong shape says what to fix:
/// JSON (a JSON-serialized JWS or JWE) instead of the compact form,
/// whitespace around the token, an HTTP authorization scheme (`Bearer `,
/// `DPoP `, ...) in front of it. Called on the error path only; the token
/// itself is never quoted.
pub fn explain(token: &[u8], err: Error) -> Error {
    if !matches!(err.kind(), ErrorKind::Malformed | ErrorKind::Unsupported) {
        return err;
    }
    let trimmed = token.trim_ascii();
    if trimmed.first() == Some(&b'{') {
        return Error::new(
            ErrorKind::Unsupported,
            "the token is JSON (a JSON-serialized JWS or JWE, RFC 7515 section 7.2); \
             only the compact form is accepted: three base64url segments joined by dots",
        );
    }
    if err.kind() != ErrorKind::Malformed {
        return err;
    }
    if !trimmed.is_empty() && trimmed.len() != token.len() {
        return Error::new(
            ErrorKind::Malformed,
            "the token has whitespace around it (a trailing newline?); \
             strip it before verifying",
        );
    }
    let scheme_end = token.iter().take(16).position(|b| *b == b' ');
    match scheme_end {
        Some(end) if end > 0 && token[..end].iter().all(u8::is_ascii_alphabetic) => Error::new(
            ErrorKind::Malformed,
            "the token starts with an authorization scheme (such as \"Bearer \"); \
                 pass only the token, without the scheme",
        ),
        _ => err,
    }
}

/// Strict base64url: no padding, no `+`/`/`, no whitespace, canonical
/// trailing bits (base64-simd's strict decoder; SIMD where the CPU has it).
pub fn decode(segment: &[u8]) -> Result<Vec<u8>> {
    URL_SAFE_NO_PAD
        .decode_to_vec(segment)
        .map_err(|_| malformed("invalid base64url"))
}

/// Stack room for one decoded segment: a segment that fits is decoded here,
/// with no heap allocation (and no zeroing: only the decoded bytes are ever
/// read back); a larger one is decoded into a vector the room keeps.
pub struct Room<const N: usize> {
    stack: [MaybeUninit<u8>; N],
    spill: Vec<u8>,
}

impl<const N: usize> Room<N> {
    pub fn new() -> Self {
        Room {
            stack: [const { MaybeUninit::uninit() }; N],
            spill: Vec::new(),
        }
    }

    /// Decodes `segment` like [`decode`], into this room.
    pub fn decode(&mut self, segment: &[u8]) -> Result<&[u8]> {
        if URL_SAFE_NO_PAD.estimated_decoded_length(segment.len()) > N {
            self.spill = decode(segment)?;
            return Ok(&self.spill);
        }
        match URL_SAFE_NO_PAD.decode(segment, Out::from_uninit_slice(&mut self.stack)) {
            Ok(decoded) => Ok(decoded),
            Err(_) => Err(malformed("invalid base64url")),
        }
    }
}

impl<const N: usize> Default for Room<N> {
    fn default() -> Self {
        Room::new()
    }
}

/// Encodes bytes as unpadded base64url (used by tests and diagnostics).
pub fn encode(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode_to_string(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_three_segments() {
        let s = split(b"aGk.eyJ9.c2ln", 100).unwrap();
        assert_eq!(s.header, b"aGk");
        assert_eq!(s.payload, b"eyJ9");
        assert_eq!(s.signature, b"c2ln");
        assert_eq!(s.signing_input, b"aGk.eyJ9");
    }

    #[test]
    fn refuses_wrong_shapes() {
        for (token, kind) in [
            (&b""[..], ErrorKind::Malformed),
            (b"a.b", ErrorKind::Malformed),
            (b"a.b.c.d", ErrorKind::Malformed),
            (b"a.b.c.d.e", ErrorKind::Unsupported),
            (b"a.b.c.d.e.f", ErrorKind::Malformed),
            (b".b.c", ErrorKind::Malformed),
            (b"a..c", ErrorKind::Malformed),
            (b"a.b.", ErrorKind::Malformed),
        ] {
            assert_eq!(split(token, 100).unwrap_err().kind(), kind, "{token:?}");
        }
    }

    #[test]
    fn an_authorization_scheme_is_named() {
        let err = explain(b"Bearer aGk.eyJ9.c2ln", malformed("invalid base64url"));
        assert!(err.message().contains("without the scheme"));
        let err = explain(b"bearer aGk.eyJ9.c2ln", malformed("invalid base64url"));
        assert!(err.message().contains("without the scheme"));
        // Other refusals keep their message.
        let err = explain(b"aGk.eyJ9.c2ln", malformed("invalid base64url"));
        assert_eq!(err.message(), "invalid base64url");
        let err = explain(b"Bearer x", Error::new(ErrorKind::Signature, "bad"));
        assert_eq!(err.kind(), ErrorKind::Signature);
    }

    #[test]
    fn json_serialization_and_whitespace_are_named() {
        // A JSON-serialized JWS, also one whose dots would read as a JWE.
        for token in [
            &br#"{"payload":"eyJ9","signatures":[{"protected":"aGk","signature":"c2ln"}]}"#[..],
            br#" {"payload":"eyJ9","header":{"kid":"a.b.c.d"},"signature":"c2ln"}"#,
        ] {
            let err = explain(token, split(token, 1000).unwrap_err());
            assert_eq!(err.kind(), ErrorKind::Unsupported);
            assert!(
                err.message().contains("JSON-serialized"),
                "{}",
                err.message()
            );
            assert!(!err.message().contains("c2ln"));
        }
        // A compact JWE keeps its own message.
        let jwe = b"a.b.c.d.e";
        let err = explain(jwe, split(jwe, 100).unwrap_err());
        assert!(err.message().contains("JWE"));
        // Whitespace around the token (not inside it).
        for token in [
            &b"aGk.eyJ9.c2ln\n"[..],
            b" aGk.eyJ9.c2ln",
            b"\taGk.eyJ9.c2ln\r\n",
        ] {
            let err = explain(token, malformed("invalid base64url"));
            assert_eq!(err.kind(), ErrorKind::Malformed);
            assert!(err.message().contains("whitespace around"), "{token:?}");
        }
        let err = explain(b"aGk.eyJ9 .c2ln", malformed("invalid base64url"));
        assert_eq!(err.message(), "invalid base64url");
    }

    #[test]
    fn size_cap_comes_first() {
        let big = vec![b'a'; 101];
        assert_eq!(split(&big, 100).unwrap_err().kind(), ErrorKind::TooLarge);
        assert!(split(b"aGk.eyJ9.c2ln", 12).is_err());
        assert!(split(b"aGk.eyJ9.c2ln", 13).is_ok());
    }

    #[test]
    fn base64url_is_strict() {
        assert_eq!(decode(b"aGk").unwrap(), b"hi");
        for bad in [
            &b"aGk="[..],
            b"a+8",
            b"a/8",
            b"aG k",
            b"aGk\n",
            b"aGl",
            b"YR",
            b"\xc3\xa9",
            b"a",
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
        assert_eq!(encode(b"hi"), "aGk");
    }

    /// A room decodes exactly as `decode` does, on the stack up to its
    /// size and on the heap beyond it, and refuses the same bad input.
    #[test]
    fn room_decodes_like_decode() {
        for length in (0..=40).chain(90..=100) {
            let data: Vec<u8> = (0..length).map(|i| (i * 7 + 1) as u8).collect();
            let text = encode(&data);
            let mut room = Room::<64>::new();
            assert_eq!(room.decode(text.as_bytes()).unwrap(), &data[..], "{length}");
        }
        let mut room = Room::<64>::new();
        for bad in [&b"aGk="[..], b"a+8", b"aGl", b"a"] {
            assert!(room.decode(bad).is_err(), "{bad:?}");
        }
        let long_bad = [&[b'A'; 200][..], b"="].concat();
        assert!(room.decode(&long_bad).is_err());
        assert_eq!(room.decode(b"aGk").unwrap(), b"hi");
    }
}
