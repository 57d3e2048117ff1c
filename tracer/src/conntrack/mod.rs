//! Conntrack/NAT state: which backend a Service connection was sent to (`netlink.rs`), how many
//! connects each backend answered (for `stages/service_view.rs`), entries destroyed before we
//! asked (`events.rs`, followed only while refusals need them: `subscription.rs`), and NAT entries
//! that never got a reply (`stale.rs`), from periodic dumps on a background thread (`dumper.rs`).
pub mod dumper;
pub mod events;
pub mod netlink;
pub mod stale;
pub mod subscription;
