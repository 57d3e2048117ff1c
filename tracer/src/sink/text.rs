//! Plain text that reads like `conntrack -E`, verdict first:
//! ```text
//! [ABANDONED]   tcp 10.231.1.1:40522 -> 10.231.1.2:9 syns=3 3.0s pid=4242 comm=curl netns=tb-c
//!               The application gave up after 3.0s and 3 SYNs with no answer from 10.231.1.2:9: ...
//! ```
use std::io::{self, Write};

use super::Sink;
use crate::record::Record;

pub struct TextSink<W: Write> {
    out: W,
}

impl<W: Write> TextSink<W> {
    pub fn new(out: W) -> TextSink<W> {
        TextSink { out }
    }
}

impl<W: Write> Sink for TextSink<W> {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        match record {
            Record::Connect(c) => {
                let tag = match &c.cause {
                    Some(cause) => format!("[{} {cause}]", c.verdict.to_uppercase()),
                    None => format!("[{}]", c.verdict.to_uppercase()),
                };
                let dst = c.dialed.as_ref().map_or_else(
                    || c.dst.clone(),
                    |dialed| format!("{dialed} backend={}", c.dst),
                );
                writeln!(
                    self.out,
                    "{tag:<20} tcp {} -> {dst} syns={} {}ms pid={} comm={} netns={}",
                    c.src, c.syns, c.syn_sent_ms, c.pid, c.comm, c.netns
                )?;
                if c.is_final {
                    writeln!(self.out, "{:<20} {}", "", c.explanation)?;
                }
                Ok(())
            }
            Record::Healthy(h) => writeln!(
                self.out,
                "{:<20} tcp -> {} established={} mean={:.1}ms pid={} comm={} netns={}",
                "[ESTABLISHED]", h.dst, h.established, h.mean_syn_sent_ms, h.pid, h.comm, h.netns
            ),
            Record::Service(s) => writeln!(
                self.out,
                "{:<20} {} (last {}s, {} of {} failing)",
                "[SERVICE]", s.summary, s.window_s, s.failing, s.total
            ),
            Record::StaleNat(n) => writeln!(
                self.out,
                "{:<20} tcp SYN_SENT src={} dst={} [UNREPLIED] src={} dst={} age>={}s\n{:<20} {}",
                "[STALE NAT]",
                n.original.src,
                n.original.dst,
                n.reply.src,
                n.reply.dst,
                n.age_s,
                "",
                n.explanation
            ),
            Record::Dns(d) => writeln!(
                self.out,
                "{:<20} dns {} {} id={} {} -> {}{} pid={} comm={} netns={}\n{:<20} {}",
                format!("[DNS {}]", d.verdict.to_uppercase()),
                d.name.as_deref().unwrap_or("?"),
                d.qtype.as_deref().unwrap_or("?"),
                d.id,
                d.client,
                d.server,
                d.dialed
                    .as_ref()
                    .map_or_else(String::new, |s| format!(" (dialled {s})")),
                d.pid,
                d.comm,
                d.netns,
                "",
                d.explanation
            ),
            Record::DnsHealthy(d) => writeln!(
                self.out,
                "{:<20} dns -> {} answered={} mean={:.1}ms netns={}",
                "[DNS ANSWERED]", d.server, d.answered, d.mean_latency_ms, d.netns
            ),
            Record::DnsStuckSocket(d) => writeln!(
                self.out,
                "{:<20} dns socket {} -> {} lost={} since {} pid={} comm={} netns={}\n{:<20} {}",
                "[DNS STUCK SOCKET]",
                d.client,
                d.server,
                d.lost,
                d.since,
                d.pid,
                d.comm,
                d.netns,
                "",
                d.explanation
            ),
            Record::Stats(s) => {
                let lost = s.dropped.total();
                if lost == 0 && !s.is_final {
                    return Ok(());
                }
                writeln!(
                    self.out,
                    "{:<20} attempts={} established_first_syn={} events={} open={} dropped={lost} {:?}",
                    "[STATS]",
                    s.attempts,
                    s.established_first_syn,
                    s.events,
                    s.open_flows,
                    s.dropped
                )
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
