//! `htu` normalisation (RFC 9449 §4.3, RFC 3986 §6.2.2-6.2.3).

use std::fmt::Write as _;

use super::MAX_URI;

/// A URI as RFC 9449 §4.3 compares `htu`: query and fragment dropped, then
/// RFC 3986 syntax- and scheme-based normalisation (scheme and host
/// lowercased, default port dropped, empty path as `/`, percent-encodings
/// upper-cased and unreserved ones decoded, dot segments removed).
/// `None` for anything that is not an absolute `http`/`https` URI of
/// printable ASCII without user information.
pub fn normalize_htu(uri: &str) -> Option<String> {
    if uri.is_empty() || uri.len() > MAX_URI || !uri.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return None;
    }
    let end = uri.find(['?', '#']).unwrap_or(uri.len());
    let (scheme, rest) = uri[..end].split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return None;
    }
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']')?;
        let after = &authority[close + 1..];
        let port = if after.is_empty() {
            None
        } else {
            Some(after.strip_prefix(':')?)
        };
        (&authority[..=close], port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() || (!host.starts_with('[') && host.contains(['[', ']', ':'])) {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(digits) => {
            if digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let number: u32 = digits.parse().ok()?;
            if number > 65_535 {
                return None;
            }
            (number != default_port).then_some(number)
        }
    };
    let mut out = String::with_capacity(end + 1);
    out.push_str(&scheme);
    out.push_str("://");
    out.push_str(&host.to_ascii_lowercase());
    if let Some(port) = port {
        let _ = write!(out, ":{port}");
    }
    let path = percent_normalized(path)?;
    remove_dot_segments(if path.is_empty() { "/" } else { &path }, &mut out);
    Some(out)
}

fn hex_value(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|d| d as u8)
}

/// Percent-encodings upper-cased; those of unreserved characters decoded.
fn percent_normalized(path: &str) -> Option<String> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let high = hex_value(*bytes.get(at + 1)?)?;
            let low = hex_value(*bytes.get(at + 2)?)?;
            let value = (high << 4) | low;
            if value.is_ascii_alphanumeric() || matches!(value, b'-' | b'.' | b'_' | b'~') {
                out.push(value as char);
            } else {
                out.push('%');
                out.push(HEX[high as usize] as char);
                out.push(HEX[low as usize] as char);
            }
            at += 3;
        } else {
            out.push(bytes[at] as char);
            at += 1;
        }
    }
    Some(out)
}

/// RFC 3986 §5.2.4 on an absolute path, appended to `out`.
fn remove_dot_segments(path: &str, out: &mut String) {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    let mut kept: Vec<&str> = Vec::with_capacity(segments.len());
    for (index, segment) in segments.iter().enumerate() {
        match *segment {
            "." => {
                if index == last {
                    kept.push("");
                }
            }
            ".." => {
                kept.pop();
                if index == last {
                    kept.push("");
                }
            }
            other => kept.push(other),
        }
    }
    if kept.is_empty() {
        out.push('/');
    }
    for segment in kept {
        out.push('/');
        out.push_str(segment);
    }
}
