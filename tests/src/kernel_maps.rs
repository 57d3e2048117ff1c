//! What a running tracer keeps in its kernel maps, read with `bpftool`: for tests that check the
//! kernel side leaves nothing behind.
use std::process::Command;

use serde_json::Value;

/// The values of the map called `name` among those process `pid` holds open, each as its bytes.
/// Panics if the process has no such map or bpftool fails.
pub fn values(pid: u32, name: &str) -> Vec<Vec<u8>> {
    let id = map_ids_of(pid)
        .into_iter()
        .find(|id| bpftool(&["map", "show", "id", &id.to_string()])["name"] == name)
        .unwrap_or_else(|| panic!("process {pid} holds no BPF map named {name}"));
    let dump = bpftool(&["map", "dump", "id", &id.to_string()]);
    dump.as_array()
        .unwrap_or_else(|| panic!("bpftool map dump of {name}: not a list: {dump}"))
        .iter()
        .map(|entry| bytes(&entry["value"]))
        .collect()
}

/// The sum of a map of little-endian u64 values (an array of counts).
pub fn sum_u64(pid: u32, name: &str) -> u64 {
    values(pid, name)
        .iter()
        .map(|v| {
            u64::from_le_bytes(
                v.as_slice()
                    .try_into()
                    .unwrap_or_else(|_| panic!("{name}: values are not 8 bytes: {v:?}")),
            )
        })
        .sum()
}

fn map_ids_of(pid: u32) -> Vec<u32> {
    let mut ids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .expect("fdinfo")
        .flatten()
        .filter_map(|fd| {
            let info = std::fs::read_to_string(fd.path()).ok()?;
            let id = info.lines().find_map(|l| l.strip_prefix("map_id:"))?;
            id.trim().parse().ok()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn bpftool(args: &[&str]) -> Value {
    let out = Command::new("bpftool")
        .arg("-j")
        .args(args)
        .output()
        .expect("run bpftool (installed by `cargo xtask test`)");
    assert!(
        out.status.success(),
        "bpftool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("bpftool -j prints JSON")
}

/// A value as bpftool prints it for a map without type information: a list of "0x.." bytes.
fn bytes(value: &Value) -> Vec<u8> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("map value is not a byte list: {value}"))
        .iter()
        .map(|b| {
            let hex = b.as_str().and_then(|s| s.strip_prefix("0x"));
            u8::from_str_radix(hex.unwrap_or_else(|| panic!("not a 0x byte: {b}")), 16)
                .unwrap_or_else(|e| panic!("not a 0x byte: {b}: {e}"))
        })
        .collect()
}
