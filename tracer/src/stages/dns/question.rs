//! The first question of a UDP DNS query, read from the bytes the kernel copies right after the
//! 12-byte header (`PendingDns::question`, at most `DNS_QUESTION_BYTES`): its name and QTYPE.
//!
//! Those bytes come from any packet sent to port 53 on the node, so the reader never indexes,
//! slices or does unchecked arithmetic, and cannot panic. Its one loop consumes a label per turn
//! and stops at the 255-byte name limit (RFC 1035 3.1), so it ends within the input.
//!
//! A query's first name has no earlier name to point to (the header holds none), so a compression
//! pointer there is malformed; real resolvers never write one.
#![forbid(unsafe_code)]
#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use std::{borrow::Cow, fmt::Write as _};

/// Maximum length of a name in wire form, length octets and the root label included.
pub const MAX_NAME_LEN: usize = 255;

/// Why the copied bytes are not a question.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuestionError {
    /// The bytes end before the name, QTYPE or QCLASS does: `needed` bytes, `len` present.
    #[error("question truncated: need {needed} bytes, have {len}")]
    Truncated { needed: usize, len: usize },
    /// The name is longer than 255 bytes in wire form.
    #[error("domain name exceeds 255 bytes")]
    NameTooLong,
    /// A compression pointer in the question's name, which has nothing before it to point to.
    #[error("compression pointer in the question name")]
    Compressed,
    /// A length octet starting with the bits `01` (extended label) or `10` (reserved).
    #[error("reserved label type in length byte {byte:#04x}")]
    ReservedLabelType { byte: u8 },
}

/// The first question of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Dotted name without trailing dot, `"."` for the root. Bytes as on the wire (no case
    /// folding); like `dig`, `. \ " ( ) ; @ $` are escaped with a backslash and bytes outside
    /// `0x21..=0x7E` written `\DDD` (decimal).
    pub name: String,
    /// QTYPE, see [`qtype_name`].
    pub qtype: u16,
}

/// The question at the start of `bytes` (the bytes after the header). Bytes after its QCLASS
/// (further questions, the EDNS record) are not looked at.
///
/// # Errors
/// The first malformation found, as a [`QuestionError`].
pub fn read(bytes: &[u8]) -> Result<Question, QuestionError> {
    let mut name = String::new();
    let mut pos = 0usize;
    loop {
        let len_byte = bytes.get(pos).copied().ok_or(QuestionError::Truncated {
            needed: pos.saturating_add(1),
            len: bytes.len(),
        })?;
        match len_byte & 0xC0 {
            0x00 if len_byte == 0 => break,
            0x00 => {
                let start = pos.saturating_add(1);
                let end = start.saturating_add(usize::from(len_byte));
                // +1: the root octet that must still follow.
                if end.saturating_add(1) > MAX_NAME_LEN {
                    return Err(QuestionError::NameTooLong);
                }
                let label = bytes.get(start..end).ok_or(QuestionError::Truncated {
                    needed: end,
                    len: bytes.len(),
                })?;
                if pos > 0 {
                    name.push('.');
                }
                push_label(&mut name, label);
                pos = end;
            }
            0xC0 => return Err(QuestionError::Compressed),
            _ => return Err(QuestionError::ReservedLabelType { byte: len_byte }),
        }
    }
    if pos == 0 {
        name.push('.');
    }
    // The root octet, then QTYPE and QCLASS (read to know the question is whole, not used).
    let start = pos.saturating_add(1);
    let end = start.saturating_add(4);
    match bytes.get(start..end) {
        Some(&[hi, lo, _, _]) => Ok(Question {
            name,
            qtype: u16::from_be_bytes([hi, lo]),
        }),
        _ => Err(QuestionError::Truncated {
            needed: end,
            len: bytes.len(),
        }),
    }
}

/// Mnemonic of a QTYPE value, `TYPE<n>` (RFC 3597) for the others.
#[must_use]
pub fn qtype_name(qtype: u16) -> Cow<'static, str> {
    let s = match qtype {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        41 => "OPT",
        64 => "SVCB",
        65 => "HTTPS",
        255 => "ANY",
        n => return Cow::Owned(format!("TYPE{n}")),
    };
    Cow::Borrowed(s)
}

/// Appends one label in `dig` presentation format.
fn push_label(out: &mut String, label: &[u8]) {
    for &b in label {
        match b {
            b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => {
                out.push('\\');
                out.push(char::from(b));
            }
            0x21..=0x7E => out.push(char::from(b)),
            // Writing to a String cannot fail.
            _ => {
                let _ = write!(out, "\\{b:03}");
            }
        }
    }
}

#[cfg(test)]
#[expect(
    clippy::indexing_slicing,
    clippy::expect_used,
    reason = "tests build questions by hand"
)]
mod tests {
    use super::*;

    /// What the kernel copies of `dig web.default.svc.cluster.local A` (9.18): the 58 bytes after
    /// the header, the question (35 bytes) then the EDNS record with a client cookie.
    const DIG: &[u8] = b"\x03web\x07default\x03svc\x07cluster\x05local\x00\x00\x01\x00\x01\
        \x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x0c\x00\x0a\x00\x08\x5c\x1e\x9f\x3a\x71\x0b\
        \xd2\x44";
    /// Bytes of the question in [`DIG`]: name, QTYPE, QCLASS.
    const DIG_QUESTION_LEN: usize = 35;

    /// A question for `name` (raw wire bytes), QTYPE A, QCLASS IN.
    fn question(name: &[u8]) -> Vec<u8> {
        [name, &[0, 1, 0, 1]].concat()
    }

    /// A raw name of labels of the given lengths, then the root.
    fn raw_name(lens: &[usize]) -> Vec<u8> {
        let mut v = Vec::new();
        for &l in lens {
            v.push(u8::try_from(l).expect("label length"));
            v.extend(std::iter::repeat_n(b'x', l));
        }
        v.push(0);
        v
    }

    #[test]
    fn a_copied_query_gives_its_name_and_type() {
        assert_eq!(DIG.len(), 58);
        assert!(DIG.len() <= tracer_common::DNS_QUESTION_BYTES);
        assert_eq!(
            read(DIG),
            Ok(Question {
                name: "web.default.svc.cluster.local".into(),
                qtype: 1,
            })
        );
        assert_eq!(read(&question(&[0])).map(|q| q.name), Ok(".".into()));
        let aaaa = b"\x03www\x07example\x03com\x00\x00\x1c\x00\x01";
        let q = read(aaaa).expect("question");
        assert_eq!(
            (q.name.as_str(), &*qtype_name(q.qtype)),
            ("www.example.com", "AAAA")
        );
    }

    #[test]
    fn every_cut_of_a_question_is_an_error_and_the_whole_one_parses() {
        for n in 0..DIG_QUESTION_LEN {
            assert!(
                matches!(read(&DIG[..n]), Err(QuestionError::Truncated { .. })),
                "cut at {n}"
            );
        }
        for n in DIG_QUESTION_LEN..=DIG.len() {
            assert_eq!(read(&DIG[..n]), read(DIG), "cut at {n}");
        }
        // Inside the "default" label (length octet @4, data 5..12).
        assert_eq!(
            read(&DIG[..8]),
            Err(QuestionError::Truncated { needed: 12, len: 8 })
        );
        // Name whole, QTYPE cut in half; QCLASS missing.
        assert_eq!(
            read(&DIG[..32]),
            Err(QuestionError::Truncated {
                needed: 35,
                len: 32
            })
        );
        assert_eq!(
            read(&DIG[..33]),
            Err(QuestionError::Truncated {
                needed: 35,
                len: 33
            })
        );
    }

    #[test]
    fn every_byte_of_a_question_flipped_to_every_value_gives_a_question_or_an_error() {
        let mut parsed = 0usize;
        for at in 0..DIG.len() {
            for value in 0..=u8::MAX {
                let mut bytes = DIG.to_vec();
                bytes[at] = value;
                for n in [bytes.len(), DIG_QUESTION_LEN, at + 1] {
                    if let Ok(q) = read(&bytes[..n]) {
                        parsed += 1;
                        assert!(q.name.len() <= 4 * n, "{q:?}");
                    }
                }
                if at >= DIG_QUESTION_LEN {
                    assert_eq!(read(&bytes), read(DIG), "a byte after the question");
                }
            }
        }
        // Sanity: not every mutant is rejected.
        assert!(parsed > 10_000, "only {parsed} mutants parsed");
    }

    #[test]
    fn a_compression_pointer_in_the_name_is_malformed() {
        for name in [
            &[0xc0, 0x0c][..],
            &[0xc0, 0x00],
            b"\x03web\xc0\x04",
            &[0xff, 0xff],
        ] {
            assert_eq!(read(&question(name)), Err(QuestionError::Compressed));
        }
    }

    #[test]
    fn labels_of_64_bytes_and_more_are_reserved_label_types() {
        for byte in [0x40u8, 0x7f, 0x80, 0xbf] {
            let bytes = [&[byte][..], &[b'a'; 64], &[0, 0, 1, 0, 1]].concat();
            assert_eq!(
                read(&bytes),
                Err(QuestionError::ReservedLabelType { byte }),
                "byte {byte:#x}"
            );
        }
        // 63 is the longest label.
        let bytes = question(&raw_name(&[63]));
        assert_eq!(read(&bytes).map(|q| q.name.len()), Ok(63));
    }

    #[test]
    fn names_are_at_most_255_bytes_on_the_wire() {
        // 3 * 64 + 62 + 1 = 255 bytes: the longest name.
        let q = read(&question(&raw_name(&[63, 63, 63, 61]))).expect("255 bytes");
        assert_eq!(q.name.len(), 63 * 3 + 61 + 3);
        for lens in [&[63, 63, 63, 62][..], &[63; 5], &[1; 200]] {
            assert_eq!(
                read(&question(&raw_name(lens))),
                Err(QuestionError::NameTooLong)
            );
        }
        // 127 one-byte labels are 255 bytes.
        let q = read(&question(&raw_name(&[1; 127]))).expect("255 bytes");
        assert_eq!(q.name.len(), 127 * 2 - 1);
    }

    #[test]
    fn odd_bytes_are_escaped_like_dig_and_case_is_kept() {
        let name = [
            &[9, b'a', 0x00, b' ', b'.', b'\\', 0xff, b'Z', b'"', b';'][..],
            b"\x03Com\x00",
        ]
        .concat();
        assert_eq!(
            read(&question(&name)).map(|q| q.name),
            Ok(r#"a\000\032\.\\\255Z\"\;.Com"#.into())
        );
    }

    #[test]
    fn types_are_named_and_the_others_numbered() {
        let types = [
            (1, "A"),
            (28, "AAAA"),
            (5, "CNAME"),
            (15, "MX"),
            (16, "TXT"),
            (12, "PTR"),
            (33, "SRV"),
            (2, "NS"),
            (6, "SOA"),
            (41, "OPT"),
            (65, "HTTPS"),
            (64, "SVCB"),
            (255, "ANY"),
            (123, "TYPE123"),
        ];
        for (t, n) in types {
            assert_eq!(qtype_name(t), n);
        }
        assert!(matches!(qtype_name(1), Cow::Borrowed(_)));
    }
}
