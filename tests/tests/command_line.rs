//! Every option of every subcommand, given odd strings and numbers: never a panic, and every refusal
//! is one line. The binary runs as an unprivileged user with no capabilities, so a value that parses
//! ends at the privilege check (exit 1, one sentence) and nothing is ever attached or created.
//! Numeric options refuse out-of-range numbers while parsing (exit 2).
use std::process::Command;

use tests::tracer::tracer_bin;

const SUBCOMMANDS: [&str; 6] = ["trace", "tui", "replay", "summary", "demo", "sweep"];

/// Values anyone might type, or a fuzzer would: numbers at and past every edge, non-numbers.
const VALUES: &[&str] = &[
    "",
    " ",
    "0",
    "-0",
    "-1",
    "1",
    "0.0001",
    "1e-12",
    "1e30",
    "1e308",
    "-1e308",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "65535",
    "65536",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999",
    "0x10",
    "1,5",
    "1.5",
    " 3 ",
    "3s",
    "10m",
    "é",
    "--",
    "-",
    "/",
    "/dev/null",
    "/proc/self/status",
    "host",
    "pid:0",
    "pid:-1",
    "pid:99999999",
    "10.0.0.0/33",
    "::/129",
    "a\tb",
];

/// Options whose value is a number: out-of-range numbers must be refused while parsing.
fn numeric(help_line: &str) -> bool {
    ["<SECONDS>", "<N>", "<PORT>", "<X>"]
        .iter()
        .any(|v| help_line.contains(v))
}

/// `--name <VALUE>` options of a subcommand, from its `--help`.
fn options(subcommand: &str) -> Vec<(String, bool)> {
    let out = Command::new(tracer_bin())
        .args([subcommand, "--help"])
        .output()
        .expect("tracer --help");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let name = l.strip_prefix("--")?.split([' ', '=']).next()?;
            (l.contains(" <") && name != "help").then(|| (format!("--{name}"), numeric(l)))
        })
        .collect()
}

fn run_unprivileged(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(tracer_bin())
        .args(args)
        .env_remove("NODE_NAME")
        .output()
        .expect("setpriv tracer");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn no_value_of_any_option_panics_and_every_refusal_is_one_line() {
    let mut runs = 0;
    for subcommand in SUBCOMMANDS {
        let opts = options(subcommand);
        assert!(
            !opts.is_empty() || subcommand == "summary",
            "{subcommand} has options"
        );
        for (option, is_numeric) in &opts {
            for value in VALUES {
                let mut args = vec![subcommand, option.as_str(), value];
                if matches!(subcommand, "replay" | "summary") {
                    args.push("/nonexistent/recording.jsonl");
                }
                let (code, stderr) = run_unprivileged(&args);
                runs += 1;
                let what = format!("tracer {}: exit {code:?}\n{stderr}", args.join(" "));
                assert!(!stderr.contains("panicked"), "{what}");
                assert!(matches!(code, Some(1 | 2)), "{what}");
                assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {what}");
                assert!(stderr.starts_with("tracer: "), "{what}");
                let out_of_range = ["1e30", "1e308", "-1", "-1e308", "NaN", "inf", "1e-12"];
                if *is_numeric && out_of_range.contains(value) {
                    assert_eq!(code, Some(2), "refused while parsing: {what}");
                }
            }
        }
    }
    eprintln!("{runs} command lines tried");
}

#[test]
fn a_zero_port_and_a_zero_interval_are_refused_while_parsing() {
    let (code, stderr) = run_unprivileged(&["trace", "--port", "0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--port"), "{stderr}");
    let (code, stderr) = run_unprivileged(&["trace", "--stats-interval", "0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("out of range"), "{stderr}");
}
