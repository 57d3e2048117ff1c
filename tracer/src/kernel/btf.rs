//! Reads the running kernel's BTF (`/sys/kernel/btf/vmlinux`): which tracepoints it has, and the offsets
//! of struct members.
//!
//! aya has no CO-RE for Rust programs, so the few `struct sock` fields the kernel side reads through a
//! raw pointer get their offsets here, at start-up, and are written into the program before load.
//! Only what that needs is parsed: the header, the string section, and enough of every type record to
//! step over it. (btf-rs does this too, but its LGPL licence does not suit a statically linked tool.)
use std::ops::Range;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    #[error("not BTF data (bad magic)")]
    BadMagic,
    #[error("BTF data is truncated at byte {0}")]
    Truncated(usize),
    #[error("BTF type kind {0} is unknown to this tracer")]
    UnknownKind(u32),
    #[error("struct {0} is not in the kernel's BTF")]
    NoStruct(String),
    #[error("struct {strukt} has no member {member} in the kernel's BTF")]
    NoMember { strukt: String, member: String },
}

const MAGIC: u16 = 0xeb9f;

struct Reader<'a> {
    data: &'a [u8],
}

impl Reader<'_> {
    fn u32_at(&self, at: usize) -> Result<u32, BtfError> {
        self.data
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or(BtfError::Truncated(at))
    }

    fn str_at(&self, strings: &Range<usize>, offset: u32) -> &str {
        let start = strings.start + offset as usize;
        let bytes = self.data.get(start..strings.end).unwrap_or_default();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        std::str::from_utf8(&bytes[..end]).unwrap_or("")
    }
}

/// One type record: where it starts in the data, and its decoded header.
#[derive(Clone, Copy)]
struct TypeRecord {
    name_off: u32,
    kind: u32,
    vlen: usize,
    kind_flag: u32,
    /// `size` for structs and unions, `type` for modifiers and typedefs.
    size_or_type: u32,
    /// Where the kind-specific data (members, ...) starts.
    body: usize,
}

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_FUNC: u32 = 12;

/// The kernel's BTF, parsed once at start-up and asked for tracepoints and member offsets.
pub struct KernelBtf<'a> {
    r: Reader<'a>,
    strings: Range<usize>,
    /// Index `i` is type id `i + 1` (id 0 is `void`).
    types: Vec<TypeRecord>,
}

impl<'a> KernelBtf<'a> {
    pub fn parse(data: &'a [u8]) -> Result<KernelBtf<'a>, BtfError> {
        let r = Reader { data };
        let magic = data.get(..2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        if magic != Some(MAGIC) {
            return Err(BtfError::BadMagic);
        }
        let hdr_len = r.u32_at(4)? as usize;
        let (type_off, type_len) = (r.u32_at(8)? as usize, r.u32_at(12)? as usize);
        let (str_off, str_len) = (r.u32_at(16)? as usize, r.u32_at(20)? as usize);
        let range = hdr_len + type_off..hdr_len + type_off + type_len;
        let strings = hdr_len + str_off..hdr_len + str_off + str_len;
        let mut types = Vec::new();
        let mut at = range.start;
        while at < range.end {
            let name_off = r.u32_at(at)?;
            let info = r.u32_at(at + 4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let body = at + 12;
            let extra = match kind {
                // INT, VAR, DECL_TAG: one u32 after the record.
                1 | 14 | 17 => 4,
                // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG: nothing.
                2 | 7..=12 | 16 | 18 => 0,
                // ARRAY: element type, index type, length.
                3 => 12,
                // STRUCT, UNION, DATASEC, ENUM64: 12 bytes per member / variable / value.
                4 | 5 | 15 | 19 => 12 * vlen,
                // ENUM, FUNC_PROTO: 8 bytes per value / parameter.
                6 | 13 => 8 * vlen,
                k => return Err(BtfError::UnknownKind(k)),
            };
            types.push(TypeRecord {
                name_off,
                kind,
                vlen,
                kind_flag: info >> 31,
                size_or_type: r.u32_at(at + 8)?,
                body,
            });
            at = body + extra;
        }
        Ok(KernelBtf { r, strings, types })
    }

    fn name(&self, t: &TypeRecord) -> &str {
        self.r.str_at(&self.strings, t.name_off)
    }

    /// The record of type `id`, seen through typedefs and qualifiers.
    fn resolved(&self, mut id: u32) -> Option<TypeRecord> {
        // Chains of modifiers are short; the bound only guards against a malformed loop.
        for _ in 0..32 {
            let t = *self.types.get((id as usize).checked_sub(1)?)?;
            match t.kind {
                // TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG
                8..=11 | 18 => id = t.size_or_type,
                _ => return Some(t),
            }
        }
        None
    }

    /// Bit offset of `member` in the struct or union `t`, looking inside anonymous members (the
    /// kernel keeps e.g. `skc_daddr` in an unnamed struct inside an unnamed union).
    fn member_bits(
        &self,
        t: &TypeRecord,
        member: &str,
        depth: u32,
    ) -> Result<Option<u32>, BtfError> {
        for i in 0..t.vlen {
            let m = t.body + 12 * i;
            let raw = self.r.u32_at(m + 8)?;
            let bits = if t.kind_flag == 1 {
                raw & 0x00ff_ffff
            } else {
                raw
            };
            let name = self.r.str_at(&self.strings, self.r.u32_at(m)?);
            if name == member {
                return Ok(Some(bits));
            }
            if name.is_empty()
                && depth < 8
                && let Some(inner) = self.resolved(self.r.u32_at(m + 4)?)
                && matches!(inner.kind, KIND_STRUCT | KIND_UNION)
                && let Some(found) = self.member_bits(&inner, member, depth + 1)?
            {
                return Ok(Some(bits + found));
            }
        }
        Ok(None)
    }
}

impl KernelBtf<'_> {
    /// The first of `tracepoints` this kernel cannot attach a `tp_btf` program to: each attachable
    /// tracepoint has a `btf_trace_<name>` typedef in the kernel's BTF.
    pub fn first_missing_tracepoint<'n>(&self, tracepoints: &[&'n str]) -> Option<&'n str> {
        let typedefs: std::collections::HashSet<&str> = self
            .types
            .iter()
            .filter(|t| t.kind == KIND_TYPEDEF)
            .filter_map(|t| self.name(t).strip_prefix("btf_trace_"))
            .collect();
        tracepoints
            .iter()
            .copied()
            .find(|tp| !typedefs.contains(tp))
    }

    /// The functions of `functions` this kernel's BTF has no `FUNC` record for: fentry cannot
    /// attach to them (a function the compiler inlined everywhere, or renamed, has none).
    pub fn missing_functions<'n>(&self, functions: &[&'n str]) -> Vec<&'n str> {
        let present: std::collections::HashSet<&str> = self
            .types
            .iter()
            .filter(|t| t.kind == KIND_FUNC)
            .map(|t| self.name(t))
            .filter(|name| functions.contains(name))
            .collect();
        functions
            .iter()
            .copied()
            .filter(|f| !present.contains(f))
            .collect()
    }

    /// The BTF type id of function `name` (what a fentry program's `attach_btf_id` names).
    pub fn function_id(&self, name: &str) -> Option<u32> {
        let index = self
            .types
            .iter()
            .position(|t| t.kind == KIND_FUNC && self.name(t) == name)?;
        u32::try_from(index + 1).ok()
    }

    /// Byte offset of `member` in `struct strukt`, also when it sits in an anonymous struct or union.
    pub fn member_offset(&self, strukt: &str, member: &str) -> Result<u32, BtfError> {
        let record = self
            .types
            .iter()
            .find(|t| t.kind == KIND_STRUCT && self.name(t) == strukt)
            .ok_or_else(|| BtfError::NoStruct(strukt.into()))?;
        self.member_bits(record, member, 0)?
            .map(|bits| bits / 8)
            .ok_or_else(|| BtfError::NoMember {
                strukt: strukt.into(),
                member: member.into(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member_offset(data: &[u8], strukt: &str, member: &str) -> Result<u32, BtfError> {
        KernelBtf::parse(data)?.member_offset(strukt, member)
    }

    fn first_missing_tracepoint<'n>(
        data: &[u8],
        tracepoints: &[&'n str],
    ) -> Result<Option<&'n str>, BtfError> {
        Ok(KernelBtf::parse(data)?.first_missing_tracepoint(tracepoints))
    }

    /// A BTF blob with: `int`, and `struct sock { int a; int sk_err; }`.
    fn tiny_btf() -> Vec<u8> {
        let strings = b"\0int\0sock\0a\0sk_err\0";
        let mut types = Vec::new();
        let push = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
        // [1] INT name "int" size 4, encoding word
        push(&mut types, 1);
        push(&mut types, 1 << 24);
        push(&mut types, 4);
        push(&mut types, 32);
        // [2] STRUCT "sock" vlen 2 size 8
        push(&mut types, 5);
        push(&mut types, (4 << 24) | 2);
        push(&mut types, 8);
        for (name, bit_off) in [(10u32, 0u32), (12, 32)] {
            push(&mut types, name);
            push(&mut types, 1);
            push(&mut types, bit_off);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&[1, 0]);
        push(&mut out, 24);
        push(&mut out, 0);
        push(&mut out, types.len() as u32);
        push(&mut out, types.len() as u32);
        push(&mut out, strings.len() as u32);
        out.extend_from_slice(&types);
        out.extend_from_slice(strings);
        out
    }

    #[test]
    fn finds_member_offsets() {
        let btf = tiny_btf();
        assert_eq!(member_offset(&btf, "sock", "sk_err"), Ok(4));
        assert_eq!(member_offset(&btf, "sock", "a"), Ok(0));
        assert!(matches!(
            member_offset(&btf, "sock", "nope"),
            Err(BtfError::NoMember { .. })
        ));
        assert_eq!(
            member_offset(&btf, "task", "x"),
            Err(BtfError::NoStruct("task".into()))
        );
    }

    #[test]
    fn tracepoints_are_the_btf_trace_typedefs() {
        // `tiny_btf` plus [3] TYPEDEF "btf_trace_tcp_destroy_sock" -> int.
        let mut btf = tiny_btf();
        let name_off = b"\0int\0sock\0a\0sk_err\0".len() as u32;
        let typedef: Vec<u8> = [name_off, 8 << 24, 1]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let type_len = u32::from_le_bytes(btf[12..16].try_into().expect("4 bytes"));
        let at = 24 + type_len as usize;
        btf.splice(at..at, typedef);
        let (type_len, str_len) = (
            type_len + 12,
            u32::from_le_bytes(btf[20..24].try_into().expect("4 bytes")),
        );
        btf[12..16].copy_from_slice(&type_len.to_le_bytes());
        btf[16..20].copy_from_slice(&type_len.to_le_bytes());
        btf.extend_from_slice(b"btf_trace_tcp_destroy_sock\0");
        btf[20..24].copy_from_slice(&(str_len + 27).to_le_bytes());
        assert_eq!(
            first_missing_tracepoint(&btf, &["tcp_destroy_sock"]),
            Ok(None)
        );
        assert_eq!(
            first_missing_tracepoint(&btf, &["tcp_destroy_sock", "inet_sock_set_state"]),
            Ok(Some("inet_sock_set_state"))
        );
        assert_eq!(
            member_offset(&btf, "sock", "sk_err"),
            Ok(4),
            "the rest still parses"
        );
    }

    #[test]
    fn malformed_btf_is_an_error_not_a_panic() {
        let btf = tiny_btf();
        for len in 0..btf.len() {
            let _ = member_offset(&btf[..len], "sock", "sk_err");
        }
        assert_eq!(
            member_offset(b"garbage!", "sock", "x"),
            Err(BtfError::BadMagic)
        );
    }

    #[test]
    fn reads_the_running_kernel_when_it_has_btf() {
        // The tracer needs kernel BTF, so every machine that runs its tests has it.
        let data = std::fs::read("/sys/kernel/btf/vmlinux").expect("kernel BTF");
        let err = member_offset(&data, "sock", "sk_err").expect("sock.sk_err in vmlinux BTF");
        let queue = member_offset(&data, "sock", "sk_error_queue").expect("sock.sk_error_queue");
        assert_ne!(err, queue, "distinct members have distinct offsets");
        member_offset(&data, "sk_buff", "cb").expect("sk_buff.cb");
        member_offset(&data, "sock_exterr_skb", "ee").expect("sock_exterr_skb.ee");
        // Inside `union { __addrpair skc_addrpair; struct { __be32 skc_daddr; __be32 skc_rcv_saddr; }; }`.
        let daddr = member_offset(&data, "sock_common", "skc_daddr").expect("skc_daddr");
        let saddr = member_offset(&data, "sock_common", "skc_rcv_saddr").expect("skc_rcv_saddr");
        assert_eq!(saddr, daddr + 4, "the address pair is two adjacent __be32");
        let dport = member_offset(&data, "sock_common", "skc_dport").expect("skc_dport");
        let num = member_offset(&data, "sock_common", "skc_num").expect("skc_num");
        assert_eq!(num, dport + 2, "the port pair is two adjacent u16");
        assert_eq!(
            first_missing_tracepoint(&data, &["inet_sock_set_state", "tcp_destroy_sock"]),
            Ok(None)
        );
        assert_eq!(
            first_missing_tracepoint(&data, &["no_such_tracepoint"]),
            Ok(Some("no_such_tracepoint"))
        );
    }
}
