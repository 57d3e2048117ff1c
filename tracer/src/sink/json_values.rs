//! JSON values written straight into a line buffer, byte for byte as `serde_json` writes them: the
//! pieces of the hand-written `connect` line (`json_connect.rs`). Anything unusual (a string that
//! needs escaping, a time outside RFC 3339's years) is handed to `serde_json` itself, so the output
//! cannot differ from serde's; the common case skips serde's per-byte escaping loop, `fmt`'s
//! padding machinery and a per-record RFC 3339 date computation.
use std::{
    io,
    net::SocketAddr,
    time::{SystemTime, UNIX_EPOCH},
};

use crate::{addr_text::AddrText, clock::Timestamp};

/// `,"name":` — every field but the first of a line, as one constant: names are our own ASCII,
/// never escaped.
macro_rules! key {
    ($out:expr, $name:literal) => {
        $out.extend_from_slice(concat!(",\"", $name, "\":").as_bytes())
    };
}
pub(super) use key;

/// A JSON string. `serde_json` escapes `"`, `\` and the control characters below 0x20 and writes
/// every other byte as it is; a string with none of those is copied in one piece. (The check
/// looks at every byte, without stopping at the first hit, so the compiler vectorises it.)
#[expect(
    clippy::needless_bitwise_bool,
    reason = "no short circuit: the loop stays branch-free and vectorised"
)]
pub fn string(out: &mut Vec<u8>, s: &str) -> io::Result<()> {
    let needs_escape = s.bytes().fold(false, |found, b| {
        found | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if needs_escape {
        return serde_json::to_writer(out, s).map_err(io::Error::from);
    }
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
    Ok(())
}

pub fn number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

pub fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// `"10.0.0.1:80"`, `"[fd00::1]:443"`: the address's `Display`, as serde writes it.
pub fn socket_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    out.push(b'"');
    out.extend_from_slice(AddrText::new(addr).as_str().as_bytes());
    out.push(b'"');
}

/// `Timestamp`s as `"2026-11-30T16:40:02.118Z"`, with the date and time of day formatted once
/// per second: records come in bursts, and most share their second with the one before.
#[derive(Default)]
pub struct TimeText {
    /// The second since the epoch `prefix` is for.
    second: Option<u64>,
    /// `2026-11-30T16:40:02.`
    prefix: String,
}

/// The first second humantime does not format (year 10000).
const YEAR_10000: u64 = 253_402_300_800;

impl TimeText {
    pub fn write(&mut self, out: &mut Vec<u8>, time: Timestamp) -> io::Result<()> {
        let since_epoch = match time.0.duration_since(UNIX_EPOCH) {
            Ok(d) if d.as_secs() < YEAR_10000 => d,
            // What serde does with it (humantime refuses both), whatever that is.
            _ => return serde_json::to_writer(out, &time).map_err(io::Error::from),
        };
        let second = since_epoch.as_secs();
        if self.second != Some(second) {
            let whole = UNIX_EPOCH + std::time::Duration::from_secs(second);
            self.prefix = seconds_prefix(whole);
            self.second = Some(second);
        }
        out.push(b'"');
        out.extend_from_slice(self.prefix.as_bytes());
        let millis = since_epoch.subsec_millis();
        out.extend_from_slice(&[
            b'0' + (millis / 100) as u8,
            b'0' + (millis / 10 % 10) as u8,
            b'0' + (millis % 10) as u8,
            b'Z',
            b'"',
        ]);
        Ok(())
    }
}

/// `2026-11-30T16:40:02.`: humantime's RFC 3339 to the second, its `Z` replaced by the point
/// the milliseconds follow.
fn seconds_prefix(whole_second: SystemTime) -> String {
    let mut text = humantime::format_rfc3339_seconds(whole_second).to_string();
    text.pop();
    text.push('.');
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn serde_text<T: serde::Serialize>(value: &T) -> String {
        serde_json::to_string(value).expect("serialize")
    }

    #[test]
    fn strings_are_escaped_as_serde_escapes_them() {
        for s in [
            "",
            "curl",
            "a \"quoted\" \\path\\",
            "tab\there\nnew line\r\u{1}\u{1f}\u{7f}",
            "ünïcödé → 🦀",
        ] {
            let mut out = Vec::new();
            string(&mut out, s).expect("write");
            assert_eq!(String::from_utf8(out).expect("utf8"), serde_text(&s));
        }
    }

    #[test]
    fn addresses_are_written_as_serde_writes_them() {
        for text in [
            "0.0.0.0:0",
            "10.244.131.21:40522",
            "255.255.255.255:65535",
            "[::]:0",
            "[fd00::1]:443",
            "[::ffff:10.0.0.1]:80",
            "[fe80::1%2]:8080",
        ] {
            let addr: SocketAddr = text.parse().expect("address");
            let mut out = Vec::new();
            socket_addr(&mut out, addr);
            assert_eq!(String::from_utf8(out).expect("utf8"), serde_text(&addr));
        }
    }

    #[test]
    fn times_are_written_as_serde_writes_them_also_from_the_cache() {
        let mut times = TimeText::default();
        let base = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        for offset_ms in [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 59_999, 86_400_123, 5] {
            for extra_ns in [0, 999_999] {
                let t = Timestamp(
                    base + Duration::from_millis(offset_ms) + Duration::from_nanos(extra_ns),
                );
                let mut out = Vec::new();
                times.write(&mut out, t).expect("write");
                assert_eq!(String::from_utf8(out).expect("utf8"), serde_text(&t));
            }
        }
        let epoch = Timestamp(UNIX_EPOCH);
        let mut out = Vec::new();
        times.write(&mut out, epoch).expect("write");
        assert_eq!(String::from_utf8(out).expect("utf8"), serde_text(&epoch));
    }
}
