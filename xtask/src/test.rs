//! `cargo xtask test`: every test. Unit tests first (no root needed), then the integration tests in
//! `tests/`, which load the real programs as root and make real connections in network namespaces
//! they create. Integration tests run one at a time: each attaches to the same root cgroup and
//! tracepoints, and timing assertions (SYN retransmits 1 s apart) want a quiet machine.
use crate::{
    run::workspace_root,
    setup,
    shell::{cargo, run},
};

pub fn all(filter: Option<&str>) -> anyhow::Result<()> {
    setup::all()?;
    if filter.is_none() {
        run(cargo().args([
            "test",
            "--workspace",
            "--exclude",
            "tests",
            "--exclude",
            "tracer-ebpf",
        ]))?;
    }
    run(cargo().args(["build", "--release", "--package", "tracer"]))?;
    let tracer = workspace_root()?.join("target/release/tracer");
    let mut cmd = cargo();
    cmd.env("TRACER_BIN", tracer)
        .args(["test", "--package", "tests", "--", "--test-threads=1"]);
    if let Some(filter) = filter {
        cmd.arg(filter);
    }
    run(&mut cmd)
}
