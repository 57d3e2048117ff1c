//! `--output FILE`: checked at start, created (truncating an older recording) only when the first
//! record is written. A typo in another option, a missing privilege or kernel feature found later
//! in start-up stops the tracer before anything was written, so yesterday's recording survives.
//! A write that fails (a full disk) names the file.
use std::{
    fs::File,
    io::{self, Write},
    path::{Path, PathBuf},
};

pub struct OutputFile {
    path: PathBuf,
    file: Option<File>,
}

impl OutputFile {
    /// Checks that `path` can be a file we write: its folder exists and it is not a folder itself.
    /// Nothing is created or truncated.
    pub fn check(path: &Path) -> io::Result<OutputFile> {
        if path.is_dir() {
            return Err(io::Error::other(format!(
                "output file {} is a directory",
                path.display()
            )));
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            return Err(io::Error::other(format!(
                "output file {}: no directory {}",
                path.display(),
                parent.display()
            )));
        }
        Ok(OutputFile {
            path: path.into(),
            file: None,
        })
    }

    fn file(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            let file = File::create(&self.path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("creating output file {}: {e}", self.path.display()),
                )
            })?;
            self.file = Some(file);
        }
        Ok(self.file.as_mut().expect("just set"))
    }
}

impl OutputFile {
    fn named(&self, e: &io::Error) -> io::Error {
        io::Error::new(
            e.kind(),
            format!("writing output file {}: {e}", self.path.display()),
        )
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file()?.write(buf).map_err(|e| self.named(&e))
    }

    fn flush(&mut self) -> io::Result<()> {
        let flushed = match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        };
        flushed.map_err(|e| self.named(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_truncated_until_the_first_write() {
        let dir = std::env::temp_dir().join(format!("tracer-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("yesterday.jsonl");
        std::fs::write(&path, "a recording\n").expect("write");
        let mut out = OutputFile::check(&path).expect("a valid path");
        out.flush().expect("flush before any record");
        drop(out);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "a recording\n"
        );
        let mut out = OutputFile::check(&path).expect("a valid path");
        out.write_all(b"today\n").expect("write");
        out.flush().expect("flush");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "today\n");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    /// Issue 27, item 4: a full disk stopped the tracer with `No space left on device (os error
    /// 28)`, naming no file. `/dev/full` fails every write that way.
    #[test]
    fn a_failed_write_names_the_file() {
        let mut out = OutputFile::check(Path::new("/dev/full")).expect("a valid path");
        let err = out
            .write_all(b"a record\n")
            .expect_err("the device is full");
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(
            err.to_string(),
            "writing output file /dev/full: No space left on device (os error 28)"
        );
    }

    #[test]
    fn a_directory_or_a_missing_folder_is_refused_at_once() {
        let err = OutputFile::check(Path::new("/"))
            .err()
            .expect("a directory");
        assert!(err.to_string().contains("is a directory"), "{err}");
        let err = OutputFile::check(Path::new("/no/such/dir/x.jsonl"))
            .err()
            .expect("no folder");
        assert!(
            err.to_string().contains("no directory /no/such/dir"),
            "{err}"
        );
    }
}
