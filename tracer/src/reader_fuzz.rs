//! Property tests of the readers of untrusted input, with a fixed budget per run (`CASES`): a
//! recording given to `replay` and `summary`, a kubectl snapshot given to `--cluster-state`, and the
//! DNS question bytes the kernel copies from any packet on the node. Arbitrary text and bytes, and
//! valid inputs cut and flipped at random places: each reader returns a value or an error, never
//! panics. (`dns/question.rs` also tries every cut and every byte value of a question.)
use std::path::Path;

use proptest::prelude::*;
use tracer_common::{DnsKey, PendingDns};

use crate::{
    identity::cluster::ClusterState,
    replay,
    stages::{decode, dns::question},
};

const CASES: u32 = 512;

const RECORDING: &str = include_str!("../tests/fixtures/tui/a_dead_backend.jsonl");
const SNAPSHOT: &str = include_str!("../tests/fixtures/webhooks.json");
/// What the kernel copies after the header of `dig web.default.svc.cluster.local A`: the question
/// (35 bytes), then the start of the EDNS record.
const QUESTION: &[u8] = b"\x03web\x07default\x03svc\x07cluster\x05local\x00\x00\x01\x00\x01\
    \x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x0c\x00\x0a\x00\x08";

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// `valid` cut at `cut` and with the byte at each of `flips` replaced, as text (lossy).
fn mutated(valid: &str, cut: usize, flips: &[(usize, u8)]) -> String {
    let mut bytes = valid.as_bytes().to_vec();
    bytes.truncate(cut.min(bytes.len()));
    for &(at, byte) in flips {
        if !bytes.is_empty() {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn replay_reads_any_text_without_panicking(text in "\\PC{0,400}") {
        let _ = replay::parse(&text, Path::new("fuzz.jsonl"));
    }

    #[test]
    fn replay_reads_any_damaged_recording_without_panicking(
        cut in 0usize..8192,
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let _ = replay::parse(&mutated(RECORDING, cut, &flips), Path::new("fuzz.jsonl"));
    }

    #[test]
    fn the_snapshot_reader_takes_any_text_without_panicking(text in "\\PC{0,400}") {
        let _ = ClusterState::from_kubectl_json(&text);
    }

    #[test]
    fn the_snapshot_reader_takes_any_damaged_snapshot_without_panicking(
        cut in 0usize..65536,
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let _ = ClusterState::from_kubectl_json(&mutated(SNAPSHOT, cut, &flips));
    }

    #[test]
    fn the_dns_question_reader_takes_any_bytes_without_panicking(
        bytes in prop::collection::vec(any::<u8>(), 0..tracer_common::DNS_QUESTION_BYTES),
        claimed_len in any::<u16>(),
    ) {
        let mut pending = PendingDns::default();
        pending.question[..bytes.len()].copy_from_slice(&bytes);
        pending.question_len = claimed_len;
        let _ = decode::query(DnsKey::default(), &pending).question();
    }

    #[test]
    fn the_dns_question_reader_takes_longer_bytes_than_the_kernel_copies_without_panicking(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        if let Ok(q) = question::read(&bytes) {
            // At most 255 wire bytes, each written in at most 4 characters.
            prop_assert!(q.name.len() <= 4 * question::MAX_NAME_LEN);
        }
    }

    #[test]
    fn the_dns_question_reader_takes_any_damaged_question_without_panicking(
        cut in 0usize..=QUESTION.len(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
    ) {
        let mut pending = PendingDns::default();
        pending.question[..QUESTION.len()].copy_from_slice(QUESTION);
        pending.question_len = u16::try_from(cut).expect("short");
        for &(at, byte) in &flips {
            pending.question[at % cut.max(1)] = byte;
        }
        let read = decode::query(DnsKey::default(), &pending)
            .question()
            .map(|q| (q.name, q.qtype));
        if flips.is_empty() {
            // Whole, it names its question; cut before the end of its QCLASS, it is an error.
            if cut >= 35 {
                prop_assert_eq!(read, Ok(("web.default.svc.cluster.local".to_owned(), 1)));
            } else {
                prop_assert!(read.is_err(), "{} bytes", cut);
            }
        }
    }
}
