//! A socket address as text, exactly as `SocketAddr`'s `Display` writes it (`10.0.0.1:80`,
//! `[fd00::1]:443`), without `fmt` for IPv4: `Display` pads every octet through the formatter,
//! which was a tenth of the time of a record. Used for every address in a `connect` line and its
//! explanation.
use std::{io::Write as _, net::SocketAddr};

/// The text, on the stack.
pub struct AddrText {
    /// Room for the longest, `[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%4294967295]:65535` (58).
    buf: [u8; 64],
    len: usize,
}

impl AddrText {
    pub fn new(addr: SocketAddr) -> AddrText {
        let mut text = AddrText {
            buf: [0; 64],
            len: 0,
        };
        match addr {
            SocketAddr::V4(a) => {
                let mut digits = itoa::Buffer::new();
                for (i, octet) in a.ip().octets().into_iter().enumerate() {
                    if i > 0 {
                        text.push(b".");
                    }
                    text.push(digits.format(octet).as_bytes());
                }
                text.push(b":");
                text.push(digits.format(a.port()).as_bytes());
            }
            SocketAddr::V6(a) => {
                let mut rest = &mut text.buf[..];
                // Cannot fail: the buffer holds the longest IPv6 socket address.
                let _ = write!(rest, "{a}");
                text.len = 64 - rest.len();
            }
        }
        text
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII was written.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_display() {
        for text in [
            "0.0.0.0:0",
            "10.244.131.21:40522",
            "255.255.255.255:65535",
            "[::]:0",
            "[fd00::1]:443",
            "[::ffff:10.0.0.1]:80",
            "[fe80::1%2]:8080",
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%4294967295]:65535",
        ] {
            let addr: SocketAddr = text.parse().expect("address");
            assert_eq!(AddrText::new(addr).as_str(), addr.to_string());
        }
    }
}
