//! Putting bytes on disk, in one place: every file oscost writes goes through `write_atomic`
//! (a temporary file in the same directory, then a rename), so an interrupted or failed write
//! never leaves a partial file; outputs are checked before any work (`check_outputs`), and a
//! set of exports is serialised whole before the first file is written.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::report::Exporter;
use crate::report::html::Page;

/// Where a file at `path` would be created; an error message a user can act on when it cannot.
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Check, before any work, that `path` can be written: it is not a directory and its directory
/// accepts a new file. Leaves nothing behind.
pub fn check_writable(path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!(
            "{} is a directory; give a file name",
            path.display()
        ));
    }
    let dir = parent_dir(path);
    tempfile::NamedTempFile::new_in(&dir)
        .map(drop)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Check, before any work, a command's output paths: no path given twice, each writable.
pub fn check_outputs(paths: &[&PathBuf]) -> Result<(), String> {
    for (i, p) in paths.iter().enumerate() {
        if paths[..i].contains(p) {
            return Err(format!("{} is given for two outputs", p.display()));
        }
        check_writable(p)?;
    }
    Ok(())
}

/// Write `bytes` to `path` atomically (temporary file in the same directory, then rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = parent_dir(path);
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_data()?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}

/// A directory a report can be written into: it exists or can be made, and is writable.
pub fn check_report_dir(dir: &Path) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{} exists and is not a directory", dir.display()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    check_writable(&dir.join("index.html"))
}

/// Serialise `x` in every format first, so a failing format leaves no file of the set, then
/// write each file atomically.
pub fn export<T>(x: &T, files: &[(PathBuf, Box<dyn Exporter<T>>)]) -> anyhow::Result<()> {
    let bytes = files
        .iter()
        .map(|(p, e)| Ok((p, e.serialize(x)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (p, b) in bytes {
        write_atomic(p, &b)?;
    }
    Ok(())
}

/// Write a rendered page into `dir`: its figure files, then index.html last (a reader never
/// finds a page whose figures are missing). Returns the paths written.
pub fn write_page(dir: &Path, page: &Page) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (rel, bytes) in &page.files {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", parent.display()))?;
        }
        write_atomic(&p, bytes)?;
        written.push(p);
    }
    let index = dir.join("index.html");
    write_atomic(&index, page.html.as_bytes())?;
    written.push(index);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_checks_refuse_directories() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(check_writable(dir.path()).is_err());
        assert!(check_writable(&dir.path().join("no/such/dir/x.json")).is_err());
        assert!(check_writable(&p).is_ok());
    }

    #[test]
    fn a_page_is_written_with_its_figures_and_index_last() {
        let dir = tempfile::tempdir().unwrap();
        let page = Page {
            html: "<html></html>".into(),
            files: vec![("fig/a.svg".into(), b"<svg/>".to_vec())],
        };
        let written = write_page(dir.path(), &page).unwrap();
        assert_eq!(written.len(), 2);
        assert!(written[1].ends_with("index.html"));
        assert_eq!(
            std::fs::read(dir.path().join("fig/a.svg")).unwrap(),
            b"<svg/>"
        );
    }
}
