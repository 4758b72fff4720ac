//! The one gate every command passes before any work: what it will write set against what it
//! reads and keeps.
//!
//! A command declares, from its parsed arguments alone, an `Effects`: every file it will write
//! (an export, predict's and explain's JSON), every report directory (whose `index.html` and
//! `fig/` files it will write), every file it reads (a run file, a page it renders from), and
//! the stores it touches (its own, wherever `--db`, `OSCOST_DB` or the default puts it, and
//! push's target), with the one it saves into. `cli::Cli::dispatch` asks every command for its
//! `Effects` through one exhaustive match, so a new command cannot skip the gate, and `pass`
//! refuses, before anything else happens:
//! - an output that is a store, a store's journal (`-journal`, `-wal`, `-shm`), or a file the
//!   command reads, however either is spelled (symlinks followed, `..` and `.` resolved,
//!   hard links found by device and inode, names that do not exist yet placed by their
//!   nearest existing directory);
//! - a report directory whose `index.html`, or any file already under its `fig/`, is one of
//!   those, or that would hold a store or an input under `fig/`;
//! - two outputs that are one file, or an export inside a report directory's files;
//! - an output that cannot be written (`output::check_writable`, `output::check_report_dir`).
//!
//! Kernel settings a command will change (`run --set`, `ab --a-set/--b-set`) are resolved and
//! checked here too (`settings_guard::prepare`: an unknown name, a path outside the kernel's
//! trees, a setting twice, a read-only file, not root).
//!
//! Then the store a command saves into is proven: an existing one is opened, migrated and
//! shown to take a write now (its lock and rights, SQLite and PostgreSQL alike); a new SQLite
//! file is shown to be creatable, and is created only when the command asks for it
//! (`Passed::store`), so bad input found later by the command leaves no file behind.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::effects::output::{self, Target};
use crate::effects::store::{self, Location, Store, StoreError};

/// The fewest open files oscost works with.
const MIN_OPEN_FILES: u64 = 32;

/// A file or directory a command touches, with the flag that named it (for messages).
#[derive(Debug, Clone)]
struct Named {
    flag: String,
    path: PathBuf,
}

/// What a command will write and read, declared from its arguments before any work.
#[derive(Debug, Clone, Default)]
pub struct Effects {
    files: Vec<Named>,
    report_dirs: Vec<Named>,
    inputs: Vec<Named>,
    /// Stores touched: (what, `--db`'s value or `None` for `OSCOST_DB` / the default).
    stores: Vec<(String, Option<PathBuf>)>,
    /// The index in `stores` of the one runs are saved into, if any.
    saves_into: Option<usize>,
    /// Kernel settings per side (`run --set`: one side; `ab --a-set/--b-set`: two), as given.
    settings: Vec<Vec<String>>,
}

impl Effects {
    /// No effects yet.
    pub fn new() -> Effects {
        Effects::default()
    }

    /// A file written when `path` is given (`--json FILE`).
    pub fn writes(mut self, flag: &str, path: Option<&PathBuf>) -> Effects {
        if let Some(p) = path {
            self.files.push(Named {
                flag: flag.to_string(),
                path: p.clone(),
            });
        }
        self
    }

    /// A report directory written when `dir` is given: its `index.html` and `fig/`.
    pub fn writes_report(mut self, flag: &str, dir: Option<&PathBuf>) -> Effects {
        if let Some(d) = dir {
            self.report_dirs.push(Named {
                flag: flag.to_string(),
                path: d.clone(),
            });
        }
        self
    }

    /// A file read (a run file, a page); a reference that names no file (a stored run's id)
    /// is not a file and is left out.
    pub fn reads(mut self, what: &str, reference: &str) -> Effects {
        let p = Path::new(reference);
        if std::fs::symlink_metadata(p).is_ok() {
            self.inputs.push(Named {
                flag: what.to_string(),
                path: p.to_path_buf(),
            });
        }
        self
    }

    /// The command's store, read (or only kept safe: every command keeps the store it would
    /// use safe, even one that never opens it).
    pub fn store(mut self, db: Option<&PathBuf>) -> Effects {
        self.stores.push(("the results store".into(), db.cloned()));
        self
    }

    /// The command's store, saved into: proven before any work.
    pub fn saves(mut self, db: Option<&PathBuf>) -> Effects {
        self.stores.push(("the results store".into(), db.cloned()));
        self.saves_into = Some(self.stores.len() - 1);
        self
    }

    /// The command's store, saved into unless the user said `--no-save` (then only read, for
    /// the run-to-run history a measuring command judges against).
    pub fn saves_unless(self, no_save: bool, db: Option<&PathBuf>) -> Effects {
        if no_save {
            self.store(db)
        } else {
            self.saves(db)
        }
    }

    /// Another store written (push's `--to`), proven before any work.
    pub fn saves_other(mut self, what: &str, db: &Path) -> Effects {
        self.stores.push((what.to_string(), Some(db.to_path_buf())));
        self.saves_into = Some(self.stores.len() - 1);
        self
    }

    /// Kernel settings the command will change, one list per side (nothing when every list
    /// is empty): resolved and checked by the gate, before any write.
    pub fn sets(mut self, sides: &[&[String]]) -> Effects {
        if sides.iter().any(|s| !s.is_empty()) {
            self.settings = sides.iter().map(|s| s.to_vec()).collect();
        }
        self
    }

    /// Every path given to write, for tests and messages.
    pub fn written(&self) -> Vec<&Path> {
        self.files
            .iter()
            .chain(&self.report_dirs)
            .map(|n| n.path.as_path())
            .collect()
    }
}

/// Why the gate refused.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A usage error: the sentence says what to change.
    #[error("{0}")]
    Refused(String),
    /// The store to save into cannot take a run.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What passing the gate gives a command: the store it saves into, proven, and the kernel
/// settings it changes, resolved and checked.
#[derive(Default)]
pub struct Passed {
    store: Option<Proven>,
    settings: Option<Vec<crate::effects::settings_guard::SideSettings>>,
}

enum Proven {
    Opened(Box<Store>),
    /// A new SQLite file whose directory was shown to take it; created on `store()`.
    New(Location),
}

impl Passed {
    /// The store the command declared it saves into (created now when it is a new file).
    /// `None` when it declared none.
    pub fn store(&mut self) -> Option<Result<Store, StoreError>> {
        Some(match self.store.take()? {
            Proven::Opened(s) => Ok(*s),
            Proven::New(at) => Store::open(&at),
        })
    }

    /// The kernel settings the command declared, one `Side` per side, resolved and checked
    /// (`None` when it declared none).
    pub fn settings(&mut self) -> Option<Vec<crate::effects::settings_guard::SideSettings>> {
        self.settings.take()
    }

    /// Whether a store was proven (the command declared one).
    pub fn saves(&self) -> bool {
        self.store.is_some()
    }
}

/// What a file is for the gate: its device and inode when it exists, and where it is (the
/// canonical path, or for a name not there yet its nearest existing directory's canonical path
/// and the rest of the name).
#[derive(Debug, Clone)]
struct Place {
    inode: Option<(u64, u64)>,
    at: PathBuf,
}

impl Place {
    fn of(path: &Path) -> Place {
        // Follow symlinks (to any depth, as the writer does): a link to the store is the store.
        let followed = match output::resolve(path) {
            Ok(Target::Regular(p) | Target::Special(p) | Target::New(p)) => p,
            _ => path.to_path_buf(),
        };
        let inode = std::fs::metadata(&followed)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        Place {
            inode,
            at: located(&followed),
        }
    }

    fn same(&self, other: &Place) -> bool {
        match (self.inode, other.inode) {
            (Some(a), Some(b)) => a == b,
            _ => self.at == other.at,
        }
    }
}

/// `path` made absolute and canonical as far as it exists; the part that does not exist yet
/// (which holds no symlink) is appended with `.` dropped and `..` taken lexically.
pub fn located(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    if let Ok(c) = std::fs::canonicalize(&abs) {
        return c;
    }
    // Walk down from the root: canonical while it exists, lexical after.
    let mut out = PathBuf::from("/");
    let mut exists = true;
    for c in abs.components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => {
                out.push(n);
                if exists {
                    match std::fs::canonicalize(&out) {
                        Ok(c) => out = c,
                        Err(_) => exists = false,
                    }
                }
            }
        }
    }
    out
}

/// A file the outputs must never be: (its place, what it is, its path as given).
struct Kept {
    place: Place,
    what: String,
    path: PathBuf,
    /// The index of the store it belongs to, in `Effects::stores`.
    store: Option<usize>,
}

/// The store files at `db`: the file and SQLite's journals beside it.
fn store_files(what: &str, db: &Path, store: usize) -> Vec<Kept> {
    output::store_files(db)
        .into_iter()
        .map(|k| Kept {
            place: Place::of(&k.path),
            what: if k.path == db {
                what.to_string()
            } else {
                format!("a journal of {what}")
            },
            path: k.path,
            store: Some(store),
        })
        .collect()
}

/// Check everything `e` declares (see the module doc); then prove the store saved into.
pub fn pass(e: &Effects) -> Result<Passed, GateError> {
    check_open_files()?;
    let (kept, saving) = kept_places(e)?;
    check_stores_differ(e, &kept, saving.as_ref())?;
    let report_places = check_report_dirs(e, &kept)?;
    check_files(e, &kept, &report_places)?;
    // Kernel settings: every name resolved, every file checked writable, before any work.
    let settings = if e.settings.is_empty() {
        None
    } else {
        let sides: Vec<&[String]> = e.settings.iter().map(Vec::as_slice).collect();
        let cpus = crate::measuring::placement::allowed_cpus();
        Some(
            crate::effects::settings_guard::prepare(&sides, &cpus)
                .map_err(|e| GateError::Refused(e.to_string()))?,
        )
    };
    let store = match saving {
        None => None,
        Some(at) => Some(prove(at)?),
    };
    Ok(Passed { store, settings })
}

/// A store, a worker's pipes and a run's files need descriptors; with too few, every one of
/// them would fail with a message about something else.
fn check_open_files() -> Result<(), GateError> {
    if let Ok((soft, _)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        && soft < MIN_OPEN_FILES
    {
        return Err(GateError::Refused(format!(
            "oscost needs at least {MIN_OPEN_FILES} open files and this process may have {soft} (`ulimit -n`); raise the limit"
        )));
    }
    Ok(())
}

/// What must not be written over (every store's files, every input), and where the store
/// saved into is.
fn kept_places(e: &Effects) -> Result<(Vec<Kept>, Option<Location>), GateError> {
    let mut kept: Vec<Kept> = Vec::new();
    let mut saving: Option<Location> = None;
    for (i, (what, db)) in e.stores.iter().enumerate() {
        // Where a store is cannot always be told (a bad --db, no home): the store's own error
        // says why when the command opens it; the gate only keeps what it can find.
        let at = match store::locate(db.as_deref()) {
            Ok(at) => at,
            Err(err) if e.saves_into == Some(i) => return Err(err.into()),
            Err(_) => continue,
        };
        if let Location::File(p) = &at {
            kept.extend(store_files(what, p, i));
        }
        if e.saves_into == Some(i) {
            saving = Some(at);
        }
    }
    for n in &e.inputs {
        kept.push(Kept {
            place: Place::of(&n.path),
            what: format!("{} this command reads", n.flag),
            path: n.path.clone(),
            store: None,
        });
    }
    Ok((kept, saving))
}

/// Two stores that are one (push into the store it reads from).
fn check_stores_differ(
    e: &Effects,
    kept: &[Kept],
    saving: Option<&Location>,
) -> Result<(), GateError> {
    if let Some(Location::File(target)) = saving {
        let t = Place::of(target);
        if let Some(k) = kept
            .iter()
            .find(|k| k.store.is_some() && k.store != e.saves_into && k.place.same(&t))
        {
            return Err(GateError::Refused(format!(
                "{} and {} are the same store; give another one",
                k.path.display(),
                target.display()
            )));
        }
    }
    Ok(())
}

/// Writing `shown` (given as `flag`), at `place`, would replace something kept: why.
fn clash(kept: &[Kept], flag: &str, shown: &Path, place: &Place) -> Result<(), GateError> {
    match kept.iter().find(|k| k.place.same(place)) {
        Some(k) => Err(GateError::Refused(format!(
            "{flag} {} is {} ({}); writing there would replace it: give the output another name",
            shown.display(),
            k.what,
            k.path.display()
        ))),
        None => Ok(()),
    }
}

/// Report directories: their own checks, then every file they would write. Gives each with
/// where it is.
fn check_report_dirs<'e>(
    e: &'e Effects,
    kept: &[Kept],
) -> Result<Vec<(&'e Named, PathBuf)>, GateError> {
    let refuse = |s: String| GateError::Refused(s);
    let mut report_places: Vec<(&Named, PathBuf)> = Vec::new();
    for d in &e.report_dirs {
        output::check_report_dir(&d.path).map_err(|s| refuse(format!("{} {s}", d.flag)))?;
        // A directory made where the store's journal goes breaks the store's next write.
        clash(kept, &d.flag, &d.path, &Place::of(&d.path))?;
        let index = d.path.join("index.html");
        clash(kept, &d.flag, &index, &Place::of(&index))?;
        let fig = d.path.join("fig");
        for entry in std::fs::read_dir(&fig).into_iter().flatten().flatten() {
            let p = entry.path();
            clash(kept, &d.flag, &p, &Place::of(&p))?;
        }
        let fig_at = located(&fig);
        if let Some(k) = kept.iter().find(|k| k.place.at.starts_with(&fig_at)) {
            return Err(refuse(format!(
                "{} {}: its fig/ holds {} ({}), which the report's figures could replace; give the report another directory",
                d.flag,
                d.path.display(),
                k.what,
                k.path.display()
            )));
        }
        report_places.push((d, located(&d.path)));
    }
    Ok(report_places)
}

/// Files: writable, not kept, not one another, not a report's file.
fn check_files(
    e: &Effects,
    kept: &[Kept],
    report_places: &[(&Named, PathBuf)],
) -> Result<(), GateError> {
    let refuse = |s: String| GateError::Refused(s);
    let mut seen: Vec<(Place, &Named)> = Vec::new();
    for f in &e.files {
        let target =
            output::check_writable(&f.path).map_err(|s| refuse(format!("{} {s}", f.flag)))?;
        if target == Target::Stdout {
            if let Some((_, first)) = seen.iter().find(|(p, _)| p.at.as_os_str() == "-") {
                return Err(refuse(format!(
                    "{} and {} both write to standard output; give one of them a file",
                    first.flag, f.flag
                )));
            }
            seen.push((
                Place {
                    inode: None,
                    at: PathBuf::from("-"),
                },
                f,
            ));
            continue;
        }
        let place = Place::of(&f.path);
        clash(kept, &f.flag, &f.path, &place)?;
        if let Some((_, first)) = seen.iter().find(|(p, _)| p.same(&place)) {
            return Err(refuse(format!(
                "{} {} and {} {} are the same file; give each output its own",
                first.flag,
                first.path.display(),
                f.flag,
                f.path.display()
            )));
        }
        for (d, dir_at) in report_places {
            let index = Place::of(&d.path.join("index.html"));
            if place.same(&index) || place.at.starts_with(dir_at.join("fig")) {
                return Err(refuse(format!(
                    "{} {} is one of the files {} {} writes; give it another name",
                    f.flag,
                    f.path.display(),
                    d.flag,
                    d.path.display()
                )));
            }
        }
        seen.push((place, f));
    }
    Ok(())
}

/// An existing store opened and proven to take a write; a new SQLite file's place proven to
/// take it (nothing is created).
fn prove(at: Location) -> Result<Proven, StoreError> {
    match &at {
        Location::File(p) if std::fs::symlink_metadata(p).is_err() => {
            prove_new_file(p)?;
            Ok(Proven::New(at))
        }
        _ => Ok(Proven::Opened(Box::new(Store::open(&at)?))),
    }
}

/// A store file that does not exist yet could be created: its nearest existing directory
/// takes files (the directories between are made when the store is).
fn prove_new_file(p: &Path) -> Result<(), StoreError> {
    let cannot = |why: String| StoreError::ReadOnly {
        at: p.display().to_string(),
        why,
    };
    if p.file_name().is_some_and(|n| n.len() > 255) {
        return Err(cannot("the name is longer than 255 bytes".into()));
    }
    let dir = p.parent().unwrap_or(Path::new(""));
    output::writable_ancestor(dir).map(drop).map_err(cannot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(e: &Effects) -> String {
        match pass(e) {
            Err(GateError::Refused(s)) => s,
            Err(e) => panic!("not a refusal: {e}"),
            Ok(_) => panic!("passed"),
        }
    }

    #[test]
    fn located_places_names_that_do_not_exist_by_their_nearest_directory() {
        let d = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(d.path()).unwrap();
        assert_eq!(located(&d.path().join("a/b/../c")), real.join("a/c"));
        assert_eq!(located(&d.path().join("./x")), real.join("x"));
        std::os::unix::fs::symlink(d.path(), d.path().join("l")).unwrap();
        assert_eq!(located(&d.path().join("l/new")), real.join("new"));
    }

    #[test]
    fn an_output_that_is_the_store_or_an_input_however_spelled_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("s.db");
        std::fs::write(&db, b"x").unwrap();
        std::os::unix::fs::symlink("s.db", d.path().join("link")).unwrap();
        std::fs::hard_link(&db, d.path().join("hard")).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        for spelled in ["s.db", "link", "hard", "sub/../s.db", "./s.db", "s.db-wal"] {
            let out = d.path().join(spelled);
            let e = Effects::new().saves(Some(&db)).writes("--json", Some(&out));
            assert!(refused(&e).contains("results store"), "{spelled}");
        }
        let input = d.path().join("in.json");
        std::fs::write(&input, b"{}").unwrap();
        let e = Effects::new()
            .reads("RUN", input.to_str().unwrap())
            .writes("--csv", Some(&input));
        assert!(refused(&e).contains("RUN this command reads"));
    }

    #[test]
    fn a_report_directory_never_writes_over_the_store_an_input_or_an_export() {
        let d = tempfile::tempdir().unwrap();
        let rep = d.path().join("rep");
        std::fs::create_dir_all(rep.join("fig")).unwrap();
        let index = rep.join("index.html");
        // The store at rep/index.html, even before it exists.
        let e = Effects::new()
            .saves(Some(&index))
            .writes_report("--report", Some(&rep));
        assert!(refused(&e).contains("results store"));
        // An input there.
        std::fs::write(&index, b"<html>").unwrap();
        let e = Effects::new()
            .reads("RUN", index.to_str().unwrap())
            .writes_report("-o", Some(&rep));
        assert!(refused(&e).contains("reads"));
        // A symlink under fig/ to the store.
        std::fs::remove_file(&index).unwrap();
        let db = d.path().join("s.db");
        std::fs::write(&db, b"x").unwrap();
        std::os::unix::fs::symlink(&db, rep.join("fig/a.svg")).unwrap();
        let e = Effects::new()
            .store(Some(&db))
            .writes_report("--report", Some(&rep));
        assert!(refused(&e).contains("results store"));
        // An export that is the page.
        std::fs::remove_file(rep.join("fig/a.svg")).unwrap();
        let e = Effects::new()
            .writes("--json", Some(&index))
            .writes_report("--report", Some(&rep));
        assert!(refused(&e).contains("one of the files"));
        // A store living in fig/.
        let inside = rep.join("fig/s.db");
        let e = Effects::new()
            .store(Some(&inside))
            .writes_report("--report", Some(&rep));
        assert!(refused(&e).contains("fig/"));
        // A store beside the page is fine.
        let e = Effects::new()
            .store(Some(&rep.join("s.db")))
            .writes_report("--report", Some(&rep));
        assert!(pass(&e).is_ok());
    }

    #[test]
    fn two_outputs_that_are_one_file_are_refused_and_a_new_store_is_not_created() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("x.json");
        let b = d.path().join("./x.json");
        let e = Effects::new()
            .writes("--json", Some(&a))
            .writes("--csv", Some(&b));
        assert!(refused(&e).contains("same file"));
        let dash = PathBuf::from("-");
        let e = Effects::new()
            .writes("--json", Some(&dash))
            .writes("--csv", Some(&dash));
        assert!(refused(&e).contains("standard output"));
        let db = d.path().join("new/dir/s.db");
        let mut passed = pass(&Effects::new().saves(Some(&db))).unwrap();
        assert!(!db.exists(), "proving makes nothing");
        passed.store().unwrap().unwrap();
        assert!(db.exists());
    }

    #[test]
    fn push_into_the_store_it_reads_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("s.db");
        let other = d.path().join("./s.db");
        let e = Effects::new()
            .store(Some(&db))
            .saves_other("push's target store", &other);
        assert!(refused(&e).contains("same store"));
    }
}
