//! SHA-2: the digest of a token (the default key of the verified-token
//! cache), and the names of the SHA-2 functions HMAC runs (`key/mac.rs`).

use aws_lc_rs::digest;

/// The three SHA-2 functions HS256, HS384 and HS512 use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sha2 {
    Sha256,
    Sha384,
    Sha512,
}

impl Sha2 {
    pub(crate) const fn digest_len(self) -> usize {
        match self {
            Sha2::Sha256 => 32,
            Sha2::Sha384 => 48,
            Sha2::Sha512 => 64,
        }
    }

    pub(crate) const fn block_len(self) -> usize {
        match self {
            Sha2::Sha256 => 64,
            Sha2::Sha384 | Sha2::Sha512 => 128,
        }
    }
}

/// The raw 32-byte SHA-256 digest of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, data).as_ref());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_answer() {
        let d = super::sha256(b"abc");
        assert_eq!(d[..4], [0xba, 0x78, 0x16, 0xbf]);
        assert_eq!(d[28..], [0xf2, 0x00, 0x15, 0xad]);
    }
}
