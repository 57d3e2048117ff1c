//! Safe, bounded DNS wire-format parser (RFC 1035) for the userspace side of
//! an eBPF DNS tracer.
//!
//! The input is attacker-controlled: any process on the host can put any bytes
//! on port 53, and the eBPF side copies them verbatim. The parser therefore:
//!
//! * never indexes or slices directly (every access goes through `get`), so it
//!   cannot panic on short or malformed input;
//! * has no recursion and only loops with a fixed, small upper bound, so a
//!   single packet cannot make it spin or allocate without limit;
//! * follows compression pointers only strictly backwards, at most
//!   [`MAX_POINTER_JUMPS`] times per name, which rules out pointer loops by
//!   construction and still gives a precise error for them.
//!
//! It decodes the header, the first question and the A/AAAA addresses of the
//! answer section; everything else is validated only as far as needed to
//! walk past it.
//!
//! This file is self-contained so that it can be dropped into another crate
//! as a module. Only `thiserror` (and, behind the `serde` feature, `serde`)
//! are needed.

#![forbid(unsafe_code)]
#![allow(
    dead_code,
    reason = "a complete parser; the tracer uses the header and question part"
)]
#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use std::borrow::Cow;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Size of the fixed DNS header (RFC 1035 4.1.1).
pub const HEADER_LEN: usize = 12;

/// Maximum length of a domain name in wire form, counting every length
/// octet and the terminating root label (RFC 1035 2.3.4 / 3.1).
///
/// A name can only grow this large through a malicious or broken encoder;
/// enforcing the limit caps the size of every decoded `String` (at most
/// about 4 x 255 bytes with `\DDD` escapes) and the work spent per name.
pub const MAX_NAME_LEN: usize = 255;

/// Maximum number of non-root labels in one name.
///
/// With one-byte labels, [`MAX_NAME_LEN`] already allows at most 127 labels,
/// so this bound never fires before [`WireError::NameTooLong`]. It is kept
/// explicit as defence in depth: together with [`MAX_POINTER_JUMPS`] it gives
/// the name loop a syntactic iteration bound that does not depend on getting
/// the length arithmetic right.
pub const MAX_LABELS: usize = 128;

/// Maximum number of compression pointers followed while decoding one name.
///
/// Real encoders need one pointer per name (a suffix points at an earlier
/// name, which may itself end in one more pointer, rarely more). Pointers are
/// in addition required to point strictly backwards (see
/// [`WireError::ForwardPointer`]), which alone makes loops impossible; the
/// cap bounds the work for long legal-looking chains that no real server
/// emits.
pub const MAX_POINTER_JUMPS: usize = 16;

/// Maximum number of question entries the parser walks over.
///
/// In practice every DNS message carries exactly one question (RFC 9619
/// makes `QDCOUNT > 1` invalid for `QUERY`). To find the answer section all
/// questions have to be skipped, so a forged `QDCOUNT` of 65535 would
/// otherwise make the parser walk (and fail on) thousands of names.
pub const MAX_QUESTIONS: u16 = 8;

/// Maximum number of answer records examined.
///
/// A tracer only needs the addresses of the first few records; a response
/// with more than 64 answers is unusual, and the cap bounds the time and the
/// memory (`Vec<Answer>`) spent on a single packet.
pub const MAX_ANSWERS: u16 = 64;

/// Record type A (IPv4 address).
const TYPE_A: u16 = 1;
/// Record type AAAA (IPv6 address).
const TYPE_AAAA: u16 = 28;
/// Class IN.
const CLASS_IN: u16 = 1;

/// Errors returned by the parser. Every malformed input maps to one of these;
/// the parser never panics.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The message ends before a field that must be present: `needed` bytes
    /// are required but only `len` are available.
    #[error("message truncated: need {needed} bytes, have {len}")]
    Truncated {
        /// Offset one past the last byte the parser needed.
        needed: usize,
        /// Length of the input.
        len: usize,
    },
    /// A label is longer than 63 bytes.
    ///
    /// Not produced by the decoder: a label length is a 6-bit field, so the
    /// bytes `0x40..=0xBF` that would encode 64..=191 are label *types* and
    /// are reported as [`WireError::ReservedLabelType`]. Kept so that callers
    /// (and a future encoder) can name this condition.
    #[error("label of {len} bytes exceeds 63")]
    LabelTooLong {
        /// Offending label length.
        len: usize,
    },
    /// A name is longer than 255 bytes in wire form (RFC 1035 3.1).
    #[error("domain name exceeds 255 bytes")]
    NameTooLong,
    /// A name has more than [`MAX_LABELS`] labels.
    #[error("domain name has too many labels")]
    TooManyLabels,
    /// A compression pointer targets bytes already visited while decoding
    /// the same name.
    #[error("compression pointer loop")]
    PointerLoop,
    /// More than [`MAX_POINTER_JUMPS`] compression pointers in one name.
    #[error("more than 16 compression pointers in one name")]
    TooManyPointers,
    /// A compression pointer targets `offset`, which is at or past the end
    /// of the message.
    #[error("compression pointer to offset {offset} past end of message")]
    BadPointer {
        /// Pointer target.
        offset: usize,
    },
    /// A compression pointer targets `offset`, which is not strictly before
    /// the start of the name part currently being read (RFC 1035 4.1.4 only
    /// allows pointers to a *prior* occurrence of a name).
    #[error("compression pointer to offset {offset} does not point backwards")]
    ForwardPointer {
        /// Pointer target.
        offset: usize,
    },
    /// A label starts with the bit pattern `01` (extended label, RFC 6891)
    /// or `10` (reserved); `byte` is the whole length octet.
    #[error("reserved label type in length byte {byte:#04x}")]
    ReservedLabelType {
        /// The length octet as found on the wire.
        byte: u8,
    },
    /// A record of a known type has RDATA of the wrong length
    /// (A must be 4 bytes, AAAA 16).
    #[error("{rtype} record with rdlength {rdlength}")]
    BadRdata {
        /// Record type.
        rtype: u16,
        /// RDLENGTH as found on the wire.
        rdlength: u16,
    },
    /// `QDCOUNT` is larger than [`MAX_QUESTIONS`].
    #[error("question count {count} exceeds limit")]
    TooManyQuestions {
        /// `QDCOUNT` from the header.
        count: u16,
    },
}

/// The fixed 12-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsHeader {
    /// Transaction ID, used to match responses to queries.
    pub id: u16,
    /// QR bit: `true` for a response.
    pub is_response: bool,
    /// 4-bit OPCODE (0 = QUERY).
    pub opcode: u8,
    /// 4-bit RCODE from the header (the EDNS extended bits are not merged).
    pub rcode: u8,
    /// TC bit: the response was truncated (retry over TCP).
    pub truncated: bool,
    /// Number of entries in the question section.
    pub qdcount: u16,
    /// Number of resource records in the answer section.
    pub ancount: u16,
    /// Number of resource records in the authority section.
    pub nscount: u16,
    /// Number of resource records in the additional section.
    pub arcount: u16,
}

/// One entry of the question section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Dotted name without trailing dot, `"."` for the root. Bytes are kept
    /// as they are on the wire (no case folding); like `dig`, the bytes
    /// `. \ " ( ) ; @ $` are escaped with a backslash and bytes outside
    /// `0x21..=0x7E` as `\DDD` (decimal).
    pub name: String,
    /// QTYPE, see [`qtype_name`].
    pub qtype: u16,
    /// QCLASS (1 = IN).
    pub qclass: u16,
}

/// An address from an A or AAAA record of class IN in the answer section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Owner name of the record, formatted like [`Question::name`]. It
    /// differs from the question name when the answer follows a CNAME chain.
    pub name: String,
    /// The address (`V4` for A, `V6` for AAAA).
    pub addr: IpAddr,
    /// TTL in seconds, as found on the wire.
    pub ttl: u32,
}

/// A parsed message: header, first question and answer addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header.
    pub header: DnsHeader,
    /// The first question, `None` when `QDCOUNT` is 0.
    pub question: Option<Question>,
    /// A/AAAA addresses from the first [`MAX_ANSWERS`] answer records, in
    /// wire order. Other record types are skipped.
    pub answers: Vec<Answer>,
}

/// Removes the 2-byte big-endian length prefix of DNS over TCP
/// (RFC 1035 4.2.2) and returns exactly the message it announces.
///
/// Bytes after the announced message (e.g. a pipelined next message) are
/// ignored.
///
/// # Errors
/// [`WireError::Truncated`] if the prefix or the announced message does not
/// fit in `payload`.
pub fn strip_tcp_length(payload: &[u8]) -> Result<&[u8], WireError> {
    let len = usize::from(read_u16(payload, 0)?);
    read_bytes(payload, 2, len)
}

/// Parses only the 12-byte header.
///
/// # Errors
/// [`WireError::Truncated`] if `bytes` is shorter than 12 bytes.
pub fn parse_header(bytes: &[u8]) -> Result<DnsHeader, WireError> {
    let h = read_bytes(bytes, 0, HEADER_LEN)?;
    let word = |i: usize| -> Result<u16, WireError> { read_u16(h, i) };
    let flags = word(2)?;
    let [hi, lo] = flags.to_be_bytes();
    Ok(DnsHeader {
        id: word(0)?,
        is_response: hi & 0x80 != 0,
        opcode: (hi >> 3) & 0x0F,
        rcode: lo & 0x0F,
        truncated: hi & 0x02 != 0,
        qdcount: word(4)?,
        ancount: word(6)?,
        nscount: word(8)?,
        arcount: word(10)?,
    })
}

/// Parses a whole DNS message (a UDP payload, or a TCP payload after
/// [`strip_tcp_length`]).
///
/// Decodes the header, the first question, and walks up to
/// `min(ANCOUNT, 64)` answer records collecting A/AAAA addresses of class IN.
/// Further questions are validated and skipped; the authority and
/// additional sections are not looked at.
///
/// # Errors
/// Any [`WireError`] describing the first malformation found.
pub fn parse_message(bytes: &[u8]) -> Result<Message, WireError> {
    let header = parse_header(bytes)?;
    if header.qdcount > MAX_QUESTIONS {
        return Err(WireError::TooManyQuestions {
            count: header.qdcount,
        });
    }
    let mut pos = HEADER_LEN;

    let mut question = None;
    for i in 0..header.qdcount {
        let mut name = String::new();
        // Only the first question is kept; the others are walked without
        // building a string.
        let out = if i == 0 { Some(&mut name) } else { None };
        pos = read_name(bytes, pos, out)?;
        let qtype = read_u16(bytes, pos)?;
        let qclass = read_u16(bytes, pos.saturating_add(2))?;
        pos = pos.saturating_add(4);
        if i == 0 {
            question = Some(Question {
                name,
                qtype,
                qclass,
            });
        }
    }

    let mut answers = Vec::new();
    let mut owner = String::new();
    for _ in 0..header.ancount.min(MAX_ANSWERS) {
        owner.clear();
        pos = read_name(bytes, pos, Some(&mut owner))?;
        // TYPE(2) CLASS(2) TTL(4) RDLENGTH(2)
        let fixed = read_bytes(bytes, pos, 10)?;
        let rtype = read_u16(fixed, 0)?;
        let class = read_u16(fixed, 2)?;
        let ttl = read_u32(fixed, 4)?;
        let rdlength = read_u16(fixed, 8)?;
        pos = pos.saturating_add(10);
        let rdata = read_bytes(bytes, pos, usize::from(rdlength))?;
        pos = pos.saturating_add(rdata.len());

        if class != CLASS_IN {
            continue;
        }
        let addr = match rtype {
            TYPE_A => <[u8; 4]>::try_from(rdata)
                .map(|a| IpAddr::V4(Ipv4Addr::from(a)))
                .map_err(|_| WireError::BadRdata { rtype, rdlength })?,
            TYPE_AAAA => <[u8; 16]>::try_from(rdata)
                .map(|a| IpAddr::V6(Ipv6Addr::from(a)))
                .map_err(|_| WireError::BadRdata { rtype, rdlength })?,
            _ => continue,
        };
        answers.push(Answer {
            name: owner.clone(),
            addr,
            ttl,
        });
    }

    Ok(Message {
        header,
        question,
        answers,
    })
}

/// Mnemonic of a QTYPE/TYPE value, `TYPE<n>` (RFC 3597) for unknown ones.
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

/// Mnemonic of a 4-bit header RCODE, `RCODE<n>` for the others.
#[must_use]
pub fn rcode_name(rcode: u8) -> Cow<'static, str> {
    let s = match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        n => return Cow::Owned(format!("RCODE{n}")),
    };
    Cow::Borrowed(s)
}

// ---------------------------------------------------------------------------
// Internals
// ---------------------------------------------------------------------------

/// `len` bytes at `pos`, or `Truncated`.
fn read_bytes(msg: &[u8], pos: usize, len: usize) -> Result<&[u8], WireError> {
    let end = pos.saturating_add(len);
    msg.get(pos..end).ok_or(WireError::Truncated {
        needed: end,
        len: msg.len(),
    })
}

fn read_u8(msg: &[u8], pos: usize) -> Result<u8, WireError> {
    msg.get(pos).copied().ok_or(WireError::Truncated {
        needed: pos.saturating_add(1),
        len: msg.len(),
    })
}

fn read_u16(msg: &[u8], pos: usize) -> Result<u16, WireError> {
    let b = read_bytes(msg, pos, 2)?;
    <[u8; 2]>::try_from(b)
        .map(u16::from_be_bytes)
        .map_err(|_| WireError::Truncated {
            needed: pos.saturating_add(2),
            len: msg.len(),
        })
}

fn read_u32(msg: &[u8], pos: usize) -> Result<u32, WireError> {
    let b = read_bytes(msg, pos, 4)?;
    <[u8; 4]>::try_from(b)
        .map(u32::from_be_bytes)
        .map_err(|_| WireError::Truncated {
            needed: pos.saturating_add(4),
            len: msg.len(),
        })
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

/// Decodes the name starting at `start`, appending its presentation form to
/// `out` when given, and returns the offset just past the name *at `start`*
/// (i.e. after its first compression pointer, if any).
///
/// Invariants enforced (each gives a distinct error):
/// * the wire length of the expanded name, including length octets and the
///   root label, stays within [`MAX_NAME_LEN`], and it has at most
///   [`MAX_LABELS`] labels;
/// * at most [`MAX_POINTER_JUMPS`] pointers are followed;
/// * every pointer targets an offset inside the message and strictly before
///   `limit`, the lowest offset read so far for this name (initially
///   `start`). The sequence of `limit`s is strictly decreasing, so no byte is
///   ever read twice and loops cannot occur. A pointer that would go back to
///   already-read bytes is reported as [`WireError::PointerLoop`], any other
///   non-backward one as [`WireError::ForwardPointer`].
///
/// The loop body runs at most `MAX_LABELS + MAX_POINTER_JUMPS + 1` times:
/// every iteration consumes a label, follows a pointer or returns.
fn read_name(msg: &[u8], start: usize, mut out: Option<&mut String>) -> Result<usize, WireError> {
    let mut pos = start;
    let mut limit = start;
    // Offset after the name at `start`, fixed at the first pointer.
    let mut end: Option<usize> = None;
    // Byte ranges [from, to] read so far, one per segment between pointers;
    // only used to classify a bad pointer as a loop.
    let mut segments = [(0usize, 0usize); MAX_POINTER_JUMPS + 1];
    let mut jumps = 0usize;
    let mut seg_start = start;
    let mut labels = 0usize;
    // Octets of the expanded name so far, excluding the final root octet.
    let mut wire_len = 0usize;

    for _ in 0..=MAX_LABELS.saturating_add(MAX_POINTER_JUMPS) {
        let len_byte = read_u8(msg, pos)?;
        match len_byte & 0xC0 {
            0x00 if len_byte == 0 => {
                // The root name alone prints as ".". (No let-chain here so
                // the file also builds in edition 2021 crates.)
                if let (0, Some(out)) = (labels, out.as_deref_mut()) {
                    out.push('.');
                }
                return Ok(end.unwrap_or_else(|| pos.saturating_add(1)));
            }
            0x00 => {
                let len = usize::from(len_byte);
                labels = labels.saturating_add(1);
                if labels > MAX_LABELS {
                    return Err(WireError::TooManyLabels);
                }
                wire_len = wire_len.saturating_add(len).saturating_add(1);
                // +1: the root octet that must still follow.
                if wire_len.saturating_add(1) > MAX_NAME_LEN {
                    return Err(WireError::NameTooLong);
                }
                let label = read_bytes(msg, pos.saturating_add(1), len)?;
                if let Some(out) = out.as_deref_mut() {
                    if labels > 1 {
                        out.push('.');
                    }
                    push_label(out, label);
                }
                pos = pos.saturating_add(1).saturating_add(len);
            }
            0xC0 => {
                let lo = read_u8(msg, pos.saturating_add(1))?;
                let target = (usize::from(len_byte & 0x3F) << 8) | usize::from(lo);
                if target >= msg.len() {
                    return Err(WireError::BadPointer { offset: target });
                }
                // The segment read since the last jump, pointer included.
                let current = (seg_start, pos.saturating_add(1));
                if target >= limit {
                    let visited = segments
                        .iter()
                        .take(jumps)
                        .chain(std::iter::once(&current))
                        .any(|&(from, to)| (from..=to).contains(&target));
                    return Err(if visited {
                        WireError::PointerLoop
                    } else {
                        WireError::ForwardPointer { offset: target }
                    });
                }
                let slot = segments
                    .get_mut(jumps)
                    .filter(|_| jumps < MAX_POINTER_JUMPS)
                    .ok_or(WireError::TooManyPointers)?;
                *slot = current;
                jumps = jumps.saturating_add(1);
                end.get_or_insert(pos.saturating_add(2));
                limit = target;
                seg_start = target;
                pos = target;
            }
            _ => return Err(WireError::ReservedLabelType { byte: len_byte }),
        }
    }
    // Unreachable: the checks above return before the loop bound is hit.
    Err(WireError::TooManyLabels)
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    reason = "tests build packets by hand and may panic"
)]
mod tests {
    use super::*;

    /// Concatenates fixture pieces (so label text can be written as byte
    /// strings next to their length octets).
    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// A 12-byte header with the given fields.
    fn hdr(id: u16, flags: u16, qd: u16, an: u16, ns: u16, ar: u16) -> Vec<u8> {
        [id, flags, qd, an, ns, ar]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect()
    }

    /// `dig web.default.svc.cluster.local A` as sent by dig 9.18: RD and AD
    /// set, EDNS(0) OPT record with a client COOKIE in the additional section.
    fn dig_query() -> Vec<u8> {
        cat(&[
            // --- header (0..12)
            &[0x3b, 0x7a], // ID
            &[0x01, 0x20], // flags: QR=0 OPCODE=0 RD=1 AD=1
            &[0x00, 0x01], // QDCOUNT 1
            &[0x00, 0x00], // ANCOUNT 0
            &[0x00, 0x00], // NSCOUNT 0
            &[0x00, 0x01], // ARCOUNT 1 (OPT)
            // --- question (12..47)
            b"\x03web",     // @12
            b"\x07default", // @16
            b"\x03svc",     // @24
            b"\x07cluster", // @28
            b"\x05local",   // @36
            &[0],           // @42 root
            &[0x00, 0x01],  // @43 QTYPE A
            &[0x00, 0x01],  // @45 QCLASS IN
            // --- additional: OPT pseudo-RR (47..70)
            &[0x00],                                           // name: root
            &[0x00, 0x29],                                     // TYPE 41 (OPT)
            &[0x04, 0xd0],                                     // CLASS = UDP payload size 1232
            &[0x00, 0x00, 0x00, 0x00],                         // ext-RCODE 0, version 0, flags 0
            &[0x00, 0x0c],                                     // RDLENGTH 12
            &[0x00, 0x0a, 0x00, 0x08],                         // option COOKIE, length 8
            &[0x5c, 0x1e, 0x9f, 0x3a, 0x71, 0x0b, 0xd2, 0x44], // client cookie
        ])
    }

    /// `CoreDNS`' answer to [`dig_query`]: AA+RD+RA, one A record whose owner
    /// name is a compression pointer to the question name at offset 12.
    fn coredns_response() -> Vec<u8> {
        cat(&[
            // --- header
            &[0x3b, 0x7a], // ID (same as query)
            &[0x85, 0x80], // flags: QR=1 AA=1 RD=1 RA=1 RCODE=0
            &[0x00, 0x01], // QDCOUNT 1
            &[0x00, 0x01], // ANCOUNT 1
            &[0x00, 0x00], // NSCOUNT 0
            &[0x00, 0x01], // ARCOUNT 1 (OPT)
            // --- question (12..47), echoed
            b"\x03web",
            b"\x07default",
            b"\x03svc",
            b"\x07cluster",
            b"\x05local",
            &[0],
            &[0x00, 0x01], // A
            &[0x00, 0x01], // IN
            // --- answer @47
            &[0xc0, 0x0c],             // name: pointer to 12
            &[0x00, 0x01],             // TYPE A
            &[0x00, 0x01],             // CLASS IN
            &[0x00, 0x00, 0x00, 0x1e], // TTL 30
            &[0x00, 0x04],             // RDLENGTH 4
            &[10, 96, 12, 34],         // 10.96.12.34
            // --- additional: OPT @63
            &[
                0x00, 0x00, 0x29, 0x04, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            ],
        ])
    }

    /// Offset just past the answer section of [`coredns_response`].
    const RESPONSE_ANSWER_END: usize = 63;

    /// `www.example.com AAAA` answered via a CNAME: the CNAME target
    /// `cdn.example.com` is itself compressed, and the AAAA owner name points
    /// at that CNAME RDATA (a two-hop pointer chain).
    fn cname_aaaa_response() -> Vec<u8> {
        cat(&[
            hdr(0x1234, 0x8180, 1, 2, 0, 0).as_slice(), // QR RD RA, NOERROR
            // --- question @12
            b"\x03www",     // @12
            b"\x07example", // @16
            b"\x03com",     // @24
            &[0],           // @28
            &[0x00, 0x1c],  // AAAA
            &[0x00, 0x01],  // IN
            // --- answer 1 @33: www.example.com CNAME cdn.example.com
            &[0xc0, 0x0c],             // -> 12 "www.example.com"
            &[0x00, 0x05],             // CNAME
            &[0x00, 0x01],             // IN
            &[0x00, 0x00, 0x01, 0x2c], // TTL 300
            &[0x00, 0x06],             // RDLENGTH 6
            b"\x03cdn",                // @45
            &[0xc0, 0x10],             // @49 -> 16 "example.com"
            // --- answer 2 @51: cdn.example.com AAAA 2001:db8::1
            &[0xc0, 0x2d],             // -> 45 "cdn.example.com"
            &[0x00, 0x1c],             // AAAA
            &[0x00, 0x01],             // IN
            &[0x00, 0x00, 0x00, 0x3c], // TTL 60
            &[0x00, 0x10],             // RDLENGTH 16
            &[
                0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
            ],
        ])
    }

    #[test]
    fn dig_query_parses() {
        let m = parse_message(&dig_query()).unwrap();
        assert_eq!(
            m.header,
            DnsHeader {
                id: 0x3b7a,
                is_response: false,
                opcode: 0,
                rcode: 0,
                truncated: false,
                qdcount: 1,
                ancount: 0,
                nscount: 0,
                arcount: 1,
            }
        );
        assert_eq!(dig_query().len(), 70, "fixture: OPT RDLENGTH consistent");
        let q = m.question.unwrap();
        assert_eq!(q.name, "web.default.svc.cluster.local");
        assert_eq!((q.qtype, q.qclass), (1, 1));
        assert_eq!(qtype_name(q.qtype), "A");
        assert!(m.answers.is_empty());
    }

    #[test]
    fn coredns_response_with_compressed_answer() {
        let m = parse_message(&coredns_response()).unwrap();
        assert!(m.header.is_response);
        assert_eq!(m.header.id, 0x3b7a);
        assert_eq!(rcode_name(m.header.rcode), "NOERROR");
        assert_eq!(m.question.unwrap().name, "web.default.svc.cluster.local");
        assert_eq!(
            m.answers,
            vec![Answer {
                name: "web.default.svc.cluster.local".into(),
                addr: IpAddr::V4(Ipv4Addr::new(10, 96, 12, 34)),
                ttl: 30,
            }]
        );
    }

    #[test]
    fn cname_chain_and_aaaa() {
        let m = parse_message(&cname_aaaa_response()).unwrap();
        assert_eq!(m.question.as_ref().unwrap().name, "www.example.com");
        assert_eq!(qtype_name(m.question.unwrap().qtype), "AAAA");
        // The CNAME is skipped; only the address is collected.
        assert_eq!(
            m.answers,
            vec![Answer {
                name: "cdn.example.com".into(),
                addr: "2001:db8::1".parse().unwrap(),
                ttl: 60,
            }]
        );
    }

    #[test]
    fn nxdomain_with_soa_in_authority() {
        let msg = cat(&[
            hdr(0x0a0b, 0x8583, 1, 0, 1, 0).as_slice(), // QR AA RD RA, RCODE 3
            // --- question @12: nope.default.svc.cluster.local A IN
            b"\x04nope",    // @12
            b"\x07default", // @17
            b"\x03svc",     // @25
            b"\x07cluster", // @29 = 0x1d
            b"\x05local",   // @37
            &[0],           // @43
            &[0, 1, 0, 1],  // @44 A IN
            // --- authority @48: cluster.local SOA
            &[0xc0, 0x1d],             // -> 29 "cluster.local"
            &[0x00, 0x06],             // SOA
            &[0x00, 0x01],             // IN
            &[0x00, 0x00, 0x00, 0x1e], // TTL 30
            &[0x00, 0x2a],             // RDLENGTH 42
            b"\x02ns",                 // @60 MNAME ns.dns.cluster.local
            b"\x03dns",
            &[0xc0, 0x1d],
            b"\x0ahostmaster", // @69 RNAME hostmaster.cluster.local
            &[0xc0, 0x1d],
            &[0x65, 0xf1, 0xb2, 0xc3], // serial
            &[0x00, 0x00, 0x1c, 0x20], // refresh 7200
            &[0x00, 0x00, 0x07, 0x08], // retry 1800
            &[0x00, 0x01, 0x51, 0x80], // expire 86400
            &[0x00, 0x00, 0x00, 0x1e], // minimum 30
        ]);
        assert_eq!(msg.len(), 48 + 12 + 42, "fixture RDLENGTH consistent");
        // Fixture sanity: the SOA names decode through the pointer.
        let mut s = String::new();
        assert_eq!(read_name(&msg, 60, Some(&mut s)), Ok(69));
        assert_eq!(s, "ns.dns.cluster.local");

        let m = parse_message(&msg).unwrap();
        assert_eq!(m.header.rcode, 3);
        assert_eq!(rcode_name(m.header.rcode), "NXDOMAIN");
        assert_eq!(m.header.nscount, 1);
        assert_eq!(m.question.unwrap().name, "nope.default.svc.cluster.local");
        assert!(m.answers.is_empty());
    }

    #[test]
    fn servfail() {
        let msg = cat(&[
            hdr(0xbeef, 0x8182, 1, 0, 0, 0).as_slice(), // QR RD RA, RCODE 2
            b"\x07example",
            b"\x03com",
            &[0],
            &[0, 1, 0, 1], // A IN
        ]);
        let m = parse_message(&msg).unwrap();
        assert_eq!(rcode_name(m.header.rcode), "SERVFAIL");
        assert_eq!(m.question.unwrap().name, "example.com");
        assert!(m.answers.is_empty());
    }

    #[test]
    fn header_flags() {
        // QR=1, OPCODE=5 (UPDATE), TC=1, RCODE=5 (REFUSED)
        let h = parse_header(&hdr(1, 0x8000 | 0x2800 | 0x0200 | 0x0005, 0, 0, 0, 0)).unwrap();
        assert!(h.is_response && h.truncated);
        assert_eq!((h.opcode, h.rcode), (5, 5));
        assert_eq!(rcode_name(h.rcode), "REFUSED");
        // RD/RA/AA/Z bits do not leak into opcode/rcode.
        let h = parse_header(&hdr(1, 0x05f0, 0, 0, 0, 0)).unwrap();
        assert!(!h.is_response && !h.truncated);
        assert_eq!((h.opcode, h.rcode), (0, 0));
    }

    #[test]
    fn truncated_header_all_lengths() {
        let q = dig_query();
        for n in 0..HEADER_LEN {
            let want = Err(WireError::Truncated { needed: 12, len: n });
            assert_eq!(parse_header(&q[..n]), want);
            assert_eq!(parse_message(&q[..n]).map(|m| m.header), want);
        }
        assert!(parse_header(&q[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn truncated_question() {
        let q = dig_query();
        // Cut inside the "default" label (length octet @16, data 17..24).
        assert_eq!(
            parse_message(&q[..20]),
            Err(WireError::Truncated {
                needed: 24,
                len: 20
            })
        );
        // Header only although QDCOUNT is 1.
        assert_eq!(
            parse_message(&q[..12]),
            Err(WireError::Truncated {
                needed: 13,
                len: 12
            })
        );
        // Name complete, QTYPE cut in half.
        assert_eq!(
            parse_message(&q[..44]),
            Err(WireError::Truncated {
                needed: 45,
                len: 44
            })
        );
        // QCLASS missing.
        assert_eq!(
            parse_message(&q[..45]),
            Err(WireError::Truncated {
                needed: 47,
                len: 45
            })
        );
        // Every cut inside the question is an error, never a panic.
        for n in 12..47 {
            assert!(
                matches!(parse_message(&q[..n]), Err(WireError::Truncated { .. })),
                "cut at {n}"
            );
        }
    }

    #[test]
    fn truncated_answer_and_rdata() {
        let r = coredns_response();
        for n in 47..RESPONSE_ANSWER_END {
            assert!(
                matches!(parse_message(&r[..n]), Err(WireError::Truncated { .. })),
                "cut at {n}"
            );
        }
        // RDATA cut: 2 of the 4 address bytes present.
        assert_eq!(
            parse_message(&r[..61]),
            Err(WireError::Truncated {
                needed: 63,
                len: 61
            })
        );
    }

    #[test]
    fn label_length_64_and_reserved_types() {
        for byte in [0x40u8, 0x7f, 0x80, 0xbf] {
            let msg = cat(&[
                hdr(1, 0, 1, 0, 0, 0).as_slice(),
                &[byte], // 0x40 = "length 64": really label type 01
                &[b'a'; 64],
                &[0, 0, 1, 0, 1],
            ]);
            assert_eq!(
                parse_message(&msg),
                Err(WireError::ReservedLabelType { byte }),
                "byte {byte:#x}"
            );
        }
        // 63 is the largest legal label.
        let msg = cat(&[
            hdr(1, 0, 1, 0, 0, 0).as_slice(),
            &[63],
            &[b'a'; 63],
            &[0, 0, 1, 0, 1],
        ]);
        assert_eq!(
            parse_message(&msg).unwrap().question.unwrap().name.len(),
            63
        );
    }

    /// Question message with the given raw name bytes, QTYPE A, QCLASS IN.
    fn question_msg(name: &[u8]) -> Vec<u8> {
        cat(&[hdr(7, 0x0100, 1, 0, 0, 0).as_slice(), name, &[0, 1, 0, 1]])
    }

    /// Raw name made of `labels` labels of the given lengths, then root.
    fn raw_name(lens: &[usize]) -> Vec<u8> {
        let mut v = Vec::new();
        for &l in lens {
            v.push(l as u8);
            v.extend(std::iter::repeat_n(b'x', l));
        }
        v.push(0);
        v
    }

    #[test]
    fn name_length_limit() {
        // 3*64 + 62 + 1 = 255 wire bytes: the longest legal name.
        let m = parse_message(&question_msg(&raw_name(&[63, 63, 63, 61]))).unwrap();
        assert_eq!(m.question.unwrap().name.len(), 63 * 3 + 61 + 3);
        // 256 bytes.
        assert_eq!(
            parse_message(&question_msg(&raw_name(&[63, 63, 63, 62]))),
            Err(WireError::NameTooLong)
        );
        // 5 * 64 + 1 = 321 bytes.
        assert_eq!(
            parse_message(&question_msg(&raw_name(&[63; 5]))),
            Err(WireError::NameTooLong)
        );
    }

    #[test]
    fn name_too_long_through_pointer() {
        // Question name of 193 bytes (legal); the answer name adds 2*64
        // bytes and then points at it: 321 bytes expanded.
        let msg = cat(&[
            hdr(7, 0x8180, 1, 1, 0, 0).as_slice(),
            &raw_name(&[63, 63, 63]), // @12
            &[0, 1, 0, 1],
            &raw_name(&[63, 63])[..128], // labels without the root ...
            &[0xc0, 0x0c],               // ... then -> 12
            &[0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4],
        ]);
        assert_eq!(parse_message(&msg), Err(WireError::NameTooLong));
    }

    #[test]
    fn two_hundred_labels() {
        // 200 one-byte labels = 401 wire bytes; the 255-byte limit fires at
        // the 128th label, before the label-count limit could.
        let msg = question_msg(&raw_name(&[1; 200]));
        assert_eq!(parse_message(&msg), Err(WireError::NameTooLong));
        // 127 one-byte labels = 255 bytes: still legal.
        let m = parse_message(&question_msg(&raw_name(&[1; 127]))).unwrap();
        assert_eq!(m.question.unwrap().name.len(), 127 * 2 - 1);
    }

    #[test]
    fn pointer_self_loop() {
        // Question name @12 is a pointer to itself.
        let msg = question_msg(&[0xc0, 0x0c]);
        assert_eq!(parse_message(&msg), Err(WireError::PointerLoop));
        // A label, then a pointer back to the start of that label.
        let msg = question_msg(&[1, b'a', 0xc0, 0x0c]);
        assert_eq!(parse_message(&msg), Err(WireError::PointerLoop));
    }

    #[test]
    fn pointers_pointing_at_each_other() {
        // Zero-question message whose ID field (offset 0) holds a pointer
        // to 12, and whose answer name @12 points to 0: 12 -> 0 -> 12.
        let msg = cat(&[
            hdr(0xc00c, 0x8180, 0, 1, 0, 0).as_slice(),
            &[0xc0, 0x00], // @12 -> 0
            &[0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4],
        ]);
        assert_eq!(parse_message(&msg), Err(WireError::PointerLoop));
        // Both pointers in the question: @12 -> 14, @14 -> 12. The first
        // jump already goes forward and is rejected as such.
        let msg = question_msg(&[0xc0, 0x0e, 0xc0, 0x0c]);
        assert_eq!(
            parse_message(&msg),
            Err(WireError::ForwardPointer { offset: 14 })
        );
        // Control: the answer name "b" @19 legally points back to the
        // question name "a" @12.
        let msg = cat(&[
            hdr(1, 0x8180, 1, 1, 0, 0).as_slice(),
            &[1, b'a', 0, 0, 1, 0, 1], // @12 question "a" A IN (ends @19)
            &[1, b'b', 0xc0, 0x0c],    // @19 answer name "b" -> 12
            &[0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4],
        ]);
        assert_eq!(parse_message(&msg).unwrap().answers[0].name, "b.a");
        // Loop through labels: "b" @20 -> "a" @12 -> @20 again. The
        // answer's pointer is legal (backwards); the second one targets
        // bytes already read for this name.
        let evil = cat(&[
            hdr(1, 0x8180, 0, 0, 0, 0).as_slice(),
            &[1, b'a', 0xc0, 0x14, 0, 1], // @12 "a" -> 20
            &[1, b'b', 0xc0, 0x0c],       // @20 "b" -> 12
        ]);
        assert_eq!(read_name(&evil, 20, None), Err(WireError::PointerLoop));
    }

    #[test]
    fn forward_pointer() {
        // @12 -> 14 where a valid root label sits: still rejected.
        let msg = question_msg(&[0xc0, 0x0e, 0x00]);
        assert_eq!(
            parse_message(&msg),
            Err(WireError::ForwardPointer { offset: 14 })
        );
    }

    #[test]
    fn pointer_past_end() {
        let msg = question_msg(&[0xc0, 0xff]);
        assert_eq!(
            parse_message(&msg),
            Err(WireError::BadPointer { offset: 255 })
        );
        // Highest 14-bit offset.
        let msg = question_msg(&[0xff, 0xff]);
        assert_eq!(
            parse_message(&msg),
            Err(WireError::BadPointer { offset: 0x3fff })
        );
        // Pointer whose second octet is missing.
        let msg = cat(&[hdr(1, 0, 1, 0, 0, 0).as_slice(), &[0xc0]]);
        assert_eq!(
            parse_message(&msg),
            Err(WireError::Truncated {
                needed: 14,
                len: 13
            })
        );
    }

    /// Zero-question response whose first answer is an unparsed TXT record
    /// holding a backward chain of `chain` pointers, and whose second answer
    /// (an A record) is named by a pointer to the end of that chain, i.e.
    /// `chain + 1` jumps.
    fn pointer_chain_msg(chain: usize) -> Vec<u8> {
        let mut rdata = vec![0u8]; // @23: root
        for i in 0..chain {
            let target = 23 + if i == 0 { 0 } else { 1 + 2 * (i - 1) };
            rdata.extend_from_slice(&[0xc0, target as u8]);
        }
        let last = 23 + if chain == 0 { 0 } else { 1 + 2 * (chain - 1) };
        cat(&[
            hdr(1, 0x8180, 0, 2, 0, 0).as_slice(),
            &[0, 0, 16, 0, 1, 0, 0, 0, 1], // @12 ". TXT IN ttl 1"
            &(rdata.len() as u16).to_be_bytes(),
            &rdata,
            &[0xc0, last as u8],
            &[0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 192, 0, 2, 1],
        ])
    }

    #[test]
    fn pointer_jump_limit() {
        let m = parse_message(&pointer_chain_msg(MAX_POINTER_JUMPS - 1)).unwrap();
        assert_eq!(m.answers[0].name, ".");
        assert_eq!(m.answers[0].addr, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(
            parse_message(&pointer_chain_msg(MAX_POINTER_JUMPS)),
            Err(WireError::TooManyPointers)
        );
    }

    #[test]
    fn zero_question_message() {
        let m = parse_message(&hdr(9, 0x8180, 0, 0, 0, 0)).unwrap();
        assert_eq!(m.question, None);
        assert!(m.answers.is_empty());
        // Answers right after the header when QDCOUNT is 0.
        let msg = cat(&[
            hdr(9, 0x8180, 0, 1, 0, 0).as_slice(),
            &[0, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 127, 0, 0, 1], // . A 127.0.0.1
        ]);
        let m = parse_message(&msg).unwrap();
        assert_eq!(m.question, None);
        assert_eq!(m.answers[0].name, ".");
        assert_eq!(m.answers[0].ttl, 5);
    }

    #[test]
    fn root_name() {
        let m = parse_message(&question_msg(&[0])).unwrap();
        assert_eq!(m.question.unwrap().name, ".");
    }

    #[test]
    fn escaped_label_bytes() {
        // One label: a NUL SPACE . \ 0xff Z " ; then "com".
        let msg = question_msg(&cat(&[
            &[9, b'a', 0x00, b' ', b'.', b'\\', 0xff, b'Z', b'"', b';'],
            b"\x03com",
            &[0],
        ]));
        let name = parse_message(&msg).unwrap().question.unwrap().name;
        assert_eq!(name, r#"a\000\032\.\\\255Z\"\;.com"#);
    }

    #[test]
    fn bad_rdata_length() {
        for (rtype, rdlength) in [(1u16, 5u16), (1, 16), (28, 4), (28, 0)] {
            let msg = cat(&[
                hdr(1, 0x8180, 0, 1, 0, 0).as_slice(),
                &[0],
                &rtype.to_be_bytes(),
                &[0, 1, 0, 0, 0, 1],
                &rdlength.to_be_bytes(),
                &vec![0u8; usize::from(rdlength)],
            ]);
            assert_eq!(
                parse_message(&msg),
                Err(WireError::BadRdata { rtype, rdlength })
            );
        }
        // The same bytes in class CH (3) are not an IN address: skipped.
        let msg = cat(&[
            hdr(1, 0x8180, 0, 1, 0, 0).as_slice(),
            &[0, 0, 1, 0, 3, 0, 0, 0, 1, 0, 5, 1, 2, 3, 4, 5],
        ]);
        assert!(parse_message(&msg).unwrap().answers.is_empty());
    }

    #[test]
    fn answer_cap() {
        let mut msg = hdr(1, 0x8180, 0, 70, 0, 0);
        for i in 0..70u8 {
            msg.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 10, 0, 0, i]);
        }
        let m = parse_message(&msg).unwrap();
        assert_eq!(m.answers.len(), 64);
        assert_eq!(m.answers[63].addr, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 63)));
        // Bytes of records past the cap are never read.
        msg.truncate(12 + 64 * 15);
        assert_eq!(parse_message(&msg).unwrap().answers.len(), 64);
    }

    #[test]
    fn multiple_questions() {
        // Two questions; the first is kept, the second (compressed) skipped.
        let msg = cat(&[
            hdr(1, 0x8180, 2, 1, 0, 0).as_slice(),
            &[1, b'a', 0, 0, 1, 0, 1],           // @12 a. A IN
            &[1, b'b', 0xc0, 0x0c, 0, 28, 0, 1], // @19 b.a. AAAA IN
            &[0xc0, 0x13, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4],
        ]);
        let m = parse_message(&msg).unwrap();
        assert_eq!(m.question.unwrap().name, "a");
        assert_eq!(m.answers[0].name, "b.a");
        // A forged QDCOUNT is refused up front.
        let msg = hdr(1, 0, 9, 0, 0, 0);
        assert_eq!(
            parse_message(&msg),
            Err(WireError::TooManyQuestions { count: 9 })
        );
    }

    #[test]
    fn tcp_length_prefix() {
        let r = coredns_response();
        let mut tcp = (r.len() as u16).to_be_bytes().to_vec();
        tcp.extend_from_slice(&r);
        tcp.extend_from_slice(&[0xde, 0xad]); // start of a pipelined message
        assert_eq!(strip_tcp_length(&tcp), Ok(r.as_slice()));
        assert!(parse_message(strip_tcp_length(&tcp).unwrap()).is_ok());
        assert_eq!(
            strip_tcp_length(&[0x00]),
            Err(WireError::Truncated { needed: 2, len: 1 })
        );
        assert_eq!(
            strip_tcp_length(&[0x00, 0x09, 1]),
            Err(WireError::Truncated { needed: 11, len: 3 })
        );
        assert_eq!(strip_tcp_length(&[0, 0]), Ok(&[][..]));
    }

    #[test]
    fn names_of_codes() {
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
            (65, "HTTPS"),
            (64, "SVCB"),
            (255, "ANY"),
            (123, "TYPE123"),
        ];
        for (t, n) in types {
            assert_eq!(qtype_name(t), n);
        }
        assert!(matches!(qtype_name(1), Cow::Borrowed(_)));
        let rcodes = [
            (0, "NOERROR"),
            (1, "FORMERR"),
            (2, "SERVFAIL"),
            (3, "NXDOMAIN"),
            (4, "NOTIMP"),
            (5, "REFUSED"),
            (9, "RCODE9"),
        ];
        for (r, n) in rcodes {
            assert_eq!(rcode_name(r), n);
        }
    }

    /// Tiny xorshift64 PRNG (deterministic; no `rand` dependency).
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Parses `bytes` and, on success, checks the output bounds; a panic is
    /// reported together with the input that caused it.
    fn check_no_panic(bytes: &[u8]) {
        let Ok(res) = std::panic::catch_unwind(|| parse_message(bytes)) else {
            panic!("parse_message panicked on {bytes:02x?}");
        };
        if let Ok(m) = res {
            assert!(m.answers.len() <= usize::from(MAX_ANSWERS));
            for name in m
                .question
                .iter()
                .map(|q| &q.name)
                .chain(m.answers.iter().map(|a| &a.name))
            {
                assert!(name.len() <= 4 * MAX_NAME_LEN, "{name}");
            }
        }
    }

    #[test]
    fn every_prefix_of_response() {
        for fixture in [coredns_response(), cname_aaaa_response()] {
            for n in 0..=fixture.len() {
                check_no_panic(&fixture[..n]);
            }
        }
        // Prefixes ending before the last answer byte fail, the rest parse
        // (the trailing OPT record is not looked at).
        let r = coredns_response();
        for n in 0..=r.len() {
            assert_eq!(
                parse_message(&r[..n]).is_ok(),
                n >= RESPONSE_ANSWER_END,
                "{n}"
            );
        }
    }

    #[test]
    fn random_mutations_never_panic() {
        let fixtures = [coredns_response(), cname_aaaa_response(), dig_query()];
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut parsed_ok = 0usize;
        for i in 0..10_000 {
            let mut buf = fixtures[i % fixtures.len()].clone();
            // 1..=4 byte overwrites, biased towards length/pointer octets.
            for _ in 0..=rng.below(4) {
                let pos = rng.below(buf.len());
                buf[pos] = match rng.below(4) {
                    0 => 0xc0 | (rng.next() as u8 & 0x3f),
                    1 => rng.next() as u8 & 0x3f,
                    _ => rng.next() as u8,
                };
            }
            match rng.below(8) {
                0 => buf.truncate(rng.below(buf.len() + 1)),
                1 => buf.extend((0..rng.below(32)).map(|_| rng.next() as u8)),
                _ => {}
            }
            check_no_panic(&buf);
            parsed_ok += usize::from(parse_message(&buf).is_ok());
        }
        // Sanity: the mutations are not all rejected at the header.
        assert!(parsed_ok > 100, "only {parsed_ok} mutants parsed");
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        for _ in 0..10_000 {
            let len = rng.below(600);
            let mut buf: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            // Keep the counts small so the parser gets past the header often.
            if buf.len() >= 12 {
                buf[4] = 0;
                buf[5] = (rng.next() % 3) as u8;
                buf[6] = 0;
                buf[7] = (rng.next() % 5) as u8;
            }
            check_no_panic(&buf);
        }
    }
}
