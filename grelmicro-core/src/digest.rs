//! SHA-256 of a token, the default key of the verified-token cache.

use aws_lc_rs::digest;

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
