//! Conntrack/NAT state: which backend a Service connection was sent to (`netlink.rs`), per-backend
//! shares of verdicts per Service (`services.rs`), entries destroyed before we asked (`events.rs`,
//! followed only while refusals need them: `subscription.rs`), and NAT entries that never got a reply
//! (`stale.rs`), from periodic dumps on a background thread (`dumper.rs`).
pub mod dumper;
pub mod events;
pub mod netlink;
pub mod stale;
pub mod subscription;
