//! Files the tests write for the tracer to read (recordings, scripts, cluster state), removed when
//! the test drops them, passed or failed: a run leaves nothing in the temporary directory.
//! Shared with `tracer/tests` through `#[path]`.
use std::{fmt, ops::Deref};

/// A file under the temporary directory, named `tracer-test-RANDOM-NAME`; removed on drop.
pub struct TempFile(tempfile::TempPath);

/// Writes `contents` to a new temporary file whose name ends in `name`.
pub fn temp_file(name: &str, contents: impl AsRef<[u8]>) -> TempFile {
    let mut file = tempfile::Builder::new()
        .prefix("tracer-test-")
        .suffix(&format!("-{name}"))
        .tempfile()
        .expect("a temporary file");
    std::io::Write::write_all(&mut file, contents.as_ref()).expect("write the temporary file");
    TempFile(file.into_temp_path())
}

/// The path as text, for the command lines the tests build.
impl Deref for TempFile {
    type Target = str;

    fn deref(&self) -> &str {
        self.0
            .to_str()
            .expect("the temporary directory's path is UTF-8")
    }
}

impl fmt::Display for TempFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}
