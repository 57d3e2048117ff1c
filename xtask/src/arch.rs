//! The machine architectures the tracer ships for, and what each one is called by the tools that
//! build, package and boot it (Rust, Debian, OCI, ELF, qemu).

/// A CPU architecture of Kubernetes nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    /// x86-64 nodes (Debian's and OCI's name; `x86_64` is Rust's).
    #[default]
    #[value(name = "amd64", alias = "x86_64")]
    Amd64,
    /// 64-bit Arm nodes (Graviton, Ampere, Axion).
    #[value(name = "arm64", alias = "aarch64")]
    Arm64,
}

impl Arch {
    pub const ALL: [Arch; 2] = [Arch::Amd64, Arch::Arm64];

    /// The Rust target of the static binary.
    pub fn musl_target(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86_64-unknown-linux-musl",
            Arch::Arm64 => "aarch64-unknown-linux-musl",
        }
    }

    /// The architecture from a Rust target triple (`aarch64-unknown-linux-musl`).
    pub fn of_target(target: &str) -> Option<Arch> {
        Arch::ALL
            .into_iter()
            .find(|a| target.split('-').next() == Some(a.rust_name()))
    }

    /// Rust's (and the dist file's) name: `x86_64`, `aarch64`.
    pub fn rust_name(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86_64",
            Arch::Arm64 => "aarch64",
        }
    }

    /// Debian's and OCI's name: `amd64`, `arm64`.
    pub fn debian_name(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// `e_machine` of its ELF executables.
    pub fn elf_machine(self) -> u16 {
        const EM_X86_64: u16 = 62;
        const EM_AARCH64: u16 = 183;
        match self {
            Arch::Amd64 => EM_X86_64,
            Arch::Arm64 => EM_AARCH64,
        }
    }

    /// The machine this runs on.
    pub fn host() -> Arch {
        if cfg!(target_arch = "aarch64") {
            Arch::Arm64
        } else {
            Arch::Amd64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Arch;

    #[test]
    fn a_target_triple_names_its_architecture() {
        assert_eq!(
            Arch::of_target("aarch64-unknown-linux-musl"),
            Some(Arch::Arm64)
        );
        assert_eq!(
            Arch::of_target("x86_64-unknown-linux-musl"),
            Some(Arch::Amd64)
        );
        assert_eq!(Arch::of_target("riscv64gc-unknown-linux-musl"), None);
    }
}
