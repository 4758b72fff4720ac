//! The layers of docs/ARCHITECTURE.md, kept by the build. Every file of `src/` is parsed (syn),
//! every item outside `#[cfg(test)]` is walked, and every path it names (`crate::`, `super::`,
//! `self::`, `oscost::` in main.rs, and `use` trees of each) is resolved to the module file it
//! points into. Then:
//! - no module uses one of a higher layer (between top-level modules);
//! - the top-level modules use each other in no circle;
//! - inside one folder, the sibling files use each other in no circle (a parent `mod.rs` and
//!   its children may: the parent declares them and they use what it defines).
//!
//! `src/` holds only these folders, lib.rs and main.rs: a new module goes into the folder of
//! its layer (a test below says so where a file or folder is added beside them).
//!
//! The house's size rules are kept here too: a source file holds at most `FILE_LINES` lines,
//! and a function spans at most `FN_LINES` lines from `fn` to its closing brace, comments
//! inside it counted (clippy's `too_many_lines`, warned in lib.rs and main.rs with its
//! threshold in clippy.toml, counts code lines only; a test here checks it stays on).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Lowest first: the folders of `src/`, one per layer (docs/ARCHITECTURE.md's table). Inside a
/// folder the files may use each other but in no circle (checked below), which orders them:
/// `base`'s model above its statistics, `effects`' gate above its output.
const LAYERS: &[(&str, u32)] = &[
    ("base", 0),
    ("measuring", 1),
    ("tracing", 2),
    ("machine", 3),
    ("bench", 4),
    ("analysis", 5),
    ("report", 6),
    ("effects", 7),
    ("processes", 8),
    ("cli", 9),
    ("lib", 10),
    ("main", 10),
];

fn layer(module: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `src/tracing/ftrace.rs` -> [tracing, ftrace],
/// `src/tracing/mod.rs` -> [tracing], `src/lib.rs` -> [], `src/main.rs` -> [main].
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// Whether an item carries `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Collects the paths one file names, outside test items, as absolute module paths.
struct Paths<'a> {
    /// The module the code being walked is in (the file's, plus inline modules).
    here: Vec<String>,
    known: &'a BTreeSet<Vec<String>>,
    found: Vec<(Vec<String>, usize)>,
}

impl Paths<'_> {
    /// An absolute path from `segments` as written here, if it starts with crate, super, self
    /// (or oscost, the library's name in main.rs).
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let (mut base, rest): (Vec<String>, &[String]) = match first.as_str() {
            "crate" | "oscost" => (vec![], &segments[1..]),
            "self" => (self.here.clone(), &segments[1..]),
            "super" => {
                let mut b = self.here.clone();
                let mut i = 0;
                while segments.get(i).is_some_and(|s| s == "super") {
                    b.pop();
                    i += 1;
                }
                (b, &segments[i..])
            }
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: Vec<String>, line: usize) {
        if let Some(abs) = self.absolute(&segments) {
            // The longest prefix that is a module file.
            let mut m = abs;
            while !m.is_empty() && !self.known.contains(&m) {
                m.pop();
            }
            if !m.is_empty() {
                self.found.push((m, line));
            }
        }
    }

    fn use_tree(&mut self, prefix: Vec<String>, t: &syn::UseTree, line: usize) {
        match t {
            syn::UseTree::Path(p) => {
                let mut v = prefix;
                v.push(p.ident.to_string());
                self.use_tree(v, &p.tree, line);
            }
            syn::UseTree::Name(n) => {
                let mut v = prefix;
                v.push(n.ident.to_string());
                self.record(v, line);
            }
            syn::UseTree::Rename(r) => {
                let mut v = prefix;
                v.push(r.ident.to_string());
                self.record(v, line);
            }
            syn::UseTree::Glob(_) => self.record(prefix, line),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix.clone(), t, line);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = match i {
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::Fn(x) => &x.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Mod(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::Type(x) => &x.attrs,
            syn::Item::Use(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if is_test(attrs) {
            return;
        }
        syn::visit::visit_item(self, i);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.here.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.here.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        self.use_tree(vec![], &u.tree, line);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.record(segs, line);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // A macro's arguments are tokens: paths inside them (`crate::say!(...)`'s arguments)
        // are read as the expressions they usually are.
        if let Ok(args) = m.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) {
            for e in &args {
                self.visit_expr(e);
            }
        }
        syn::visit::visit_macro(self, m);
    }
}

/// Every file's module and the modules it names (line of each).
type Uses = Vec<(PathBuf, Vec<String>, Vec<(Vec<String>, usize)>)>;

fn all_uses(src: &Path) -> Uses {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let parsed: Vec<(PathBuf, Vec<String>, syn::File)> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", f.display()));
            (f.clone(), module_of(src, f), ast)
        })
        .collect();
    // A module declared under `#[cfg(test)]` in a file of its own (`#[cfg(test)] mod tests;`,
    // a large module's tests in a sibling file) is test code, as an inline one is.
    let tests: Vec<Vec<String>> = parsed
        .iter()
        .flat_map(|(_, here, ast)| {
            ast.items.iter().filter_map(move |item| match item {
                syn::Item::Mod(m) if m.content.is_none() && is_test(&m.attrs) => {
                    let mut path = here.clone();
                    path.push(m.ident.to_string());
                    Some(path)
                }
                _ => None,
            })
        })
        .collect();
    parsed
        .into_iter()
        .filter(|(_, here, _)| !tests.iter().any(|t| here.starts_with(t)))
        .map(|(f, here, ast)| {
            let mut v = Paths {
                here: here.clone(),
                known: &known,
                found: Vec::new(),
            };
            v.visit_file(&ast);
            (f, here, v.found)
        })
        .collect()
}

/// The members of `graph` that lie on a circle: what remains once every member that uses
/// nothing left, and every member nothing left uses, has been removed, repeatedly.
fn circled(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut left = graph.clone();
    loop {
        let used: BTreeSet<&String> = left.values().flatten().collect();
        let done: Vec<String> = left
            .iter()
            .filter(|(m, to)| to.iter().all(|t| !left.contains_key(t)) || !used.contains(m))
            .map(|(m, _)| m.clone())
            .collect();
        if done.is_empty() {
            break;
        }
        for m in done {
            left.remove(&m);
        }
    }
    left.keys().cloned().collect()
}

#[test]
fn no_module_imports_a_layer_above_it_and_no_modules_form_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let uses = all_uses(&src);
    let top = |m: &[String]| m.first().cloned().unwrap_or_else(|| "lib".into());
    let mut upward = Vec::new();
    let mut unknown = BTreeSet::new();
    let mut tops: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Per folder: sibling -> siblings it uses.
    let mut folders: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (file, here, named) in &uses {
        let from = top(here);
        let Some(from_layer) = layer(&from) else {
            unknown.insert(from);
            continue;
        };
        for (to_mod, line) in named {
            let to = top(to_mod);
            let Some(to_layer) = layer(&to) else {
                continue;
            };
            if to != from {
                tops.entry(from.clone()).or_default().insert(to.clone());
            }
            if to_layer > from_layer {
                upward.push(format!(
                    "{}:{line}: {from} (layer {from_layer}) uses {to} (layer {to_layer})",
                    file.strip_prefix(&src).unwrap().display()
                ));
            }
            // Siblings: same parent, both one level below it.
            if here.len() >= 2 && to_mod.len() >= here.len() {
                let parent = &here[..here.len() - 1];
                if to_mod.starts_with(parent) && to_mod[here.len() - 1] != here[here.len() - 1] {
                    folders
                        .entry(parent.to_vec())
                        .or_default()
                        .entry(here[here.len() - 1].clone())
                        .or_default()
                        .insert(to_mod[here.len() - 1].clone());
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules without a layer (add them to LAYERS and to docs/ARCHITECTURE.md): {unknown:?}"
    );
    assert!(
        upward.is_empty(),
        "imports that point up a layer:\n{}",
        upward.join("\n")
    );
    let c = circled(&tops);
    assert!(
        c.is_empty(),
        "top-level modules that use each other in a circle: {c:?}"
    );
    let inner: Vec<String> = folders
        .iter()
        .filter_map(|(folder, g)| {
            let c = circled(g);
            (!c.is_empty()).then(|| format!("{}/: {c:?}", folder.join("/")))
        })
        .collect();
    assert!(
        inner.is_empty(),
        "files of one folder that use each other in a circle: {inner:?}"
    );
}

#[test]
fn the_checker_sees_every_kind_of_path_and_skips_only_test_items() {
    let known: BTreeSet<Vec<String>> = [
        vec!["model"],
        vec!["stats"],
        vec!["report"],
        vec!["tracing"],
        vec!["tracing", "ringbuf"],
        vec!["tracing", "trace"],
        vec!["tracing", "ftrace"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect();
    let code = r#"
        use crate::{model::Run, stats};
        use super::ringbuf::Page;
        mod inner { fn f() { super::super::super::report::x(); } }
        fn g() { crate::say!("{}", self::helper(crate::report::printable(y))); }
        #[cfg(test)]
        mod tests { use crate::tracing::trace::Tracer; }
        #[cfg(test)]
        fn only_in_tests() { super::trace::t(); }
        #[cfg(test)]
        mod later;
        fn h() { super::trace::event(); }
    "#;
    let ast = syn::parse_file(code).unwrap();
    let mut v = Paths {
        here: vec!["tracing".into(), "ftrace".into()],
        known: &known,
        found: Vec::new(),
    };
    v.visit_file(&ast);
    let found: BTreeSet<String> = v.found.iter().map(|(m, _)| m.join("::")).collect();
    let want: BTreeSet<String> = [
        "model",
        "stats",
        "tracing::ringbuf",
        "report",
        "tracing::ftrace",
        "tracing::trace",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(found, want);
    // A test module standing first (as `store/mod.rs` has one) hides nothing after it.
    let code = "#[cfg(test)]\nmod tests;\nfn f() { crate::report::x(); }\n";
    let mut v = Paths {
        here: vec!["store".into()],
        known: &known,
        found: Vec::new(),
    };
    v.visit_file(&syn::parse_file(code).unwrap());
    assert_eq!(v.found.len(), 1);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circled(&g), ["a", "b"]);
}

/// `ls src` reads as ARCHITECTURE's layer table: one folder per layer of `LAYERS`, lib.rs and
/// main.rs, nothing else (a new module goes into the folder of its layer).
#[test]
fn src_holds_one_folder_per_layer_and_nothing_else() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut want: Vec<String> = LAYERS
        .iter()
        .map(|(m, _)| match *m {
            "lib" | "main" => format!("{m}.rs"),
            folder => folder.to_string(),
        })
        .collect();
    want.sort();
    assert_eq!(
        found, want,
        "src/ must hold the layers' folders, lib.rs and main.rs"
    );
    // Ten layers at most: past that a layer table stops being read at a glance.
    assert!(found.len() <= 12, "{found:?}");
    for (m, _) in LAYERS.iter().filter(|(m, _)| !matches!(*m, "lib" | "main")) {
        assert!(src.join(m).is_dir(), "layer {m} is a folder");
    }
}

/// The most lines a source file holds.
const FILE_LINES: usize = 700;

/// A module's unit tests in a sibling file (`tests.rs`) are apart from the rule, as the issue
/// that set it says: a file of tests grows with what it checks.
fn is_test_file(f: &Path) -> bool {
    f.file_name().is_some_and(|n| n == "tests.rs")
}

#[test]
fn no_source_file_passes_its_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    let over: Vec<String> = files
        .iter()
        .filter(|f| !is_test_file(f))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > FILE_LINES).then(|| {
                let rel = f.strip_prefix(root).unwrap().display();
                format!("{rel}: {lines} lines")
            })
        })
        .collect();
    assert!(
        over.is_empty(),
        "at most {FILE_LINES} lines a file: give a part with its own subject to a child module \
         (a file in a folder of the module's name):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_function_length_lint_stays_on() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["src/lib.rs", "src/main.rs"] {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        assert!(
            text.lines()
                .any(|l| l.trim() == "#![warn(clippy::too_many_lines)]"),
            "{f} must warn on clippy::too_many_lines"
        );
    }
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).unwrap();
    assert!(
        clippy
            .lines()
            .any(|l| l.replace(' ', "") == "too-many-lines-threshold=80"),
        "clippy.toml must set too-many-lines-threshold = 80"
    );
}

/// One name, one meaning: no public type (struct, enum, trait or alias) of `src/` is named as
/// another one is, so that a name read anywhere says which thing it is (unit-test files apart).
#[test]
fn no_public_type_name_is_defined_twice() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in files.iter().filter(|f| !is_test_file(f)) {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        for line in std::fs::read_to_string(f).unwrap().lines() {
            let t = line.trim_start();
            let Some(rest) = t.strip_prefix("pub ").or_else(|| {
                t.strip_prefix("pub(crate) ")
                    .or_else(|| t.strip_prefix("pub(super) "))
            }) else {
                continue;
            };
            let mut words = rest.split_whitespace();
            if let (Some("struct" | "enum" | "trait" | "type"), Some(name)) =
                (words.next(), words.next())
            {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                seen.entry(name).or_default().push(rel.clone());
            }
        }
    }
    assert!(seen.len() > 100, "found only {} public types", seen.len());
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(name, at)| format!("{name}: {}", at.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "public types named alike (give each the name of what it is):\n{}",
        twice.join("\n")
    );
}

/// The most lines a function spans, its doc comment apart (clippy's `too_many_lines` counts
/// code lines only; this counts every line from `fn` to its closing brace).
const FN_LINES: usize = 80;

#[derive(Default)]
struct LongFns(Vec<String>, String);

impl<'ast> Visit<'ast> for LongFns {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

impl LongFns {
    fn check(&mut self, sig: &syn::Signature, block: &syn::Block) {
        use syn::spanned::Spanned;
        let (from, to) = (sig.fn_token.span.start().line, block.span().end().line);
        if to + 1 - from > FN_LINES {
            self.0
                .push(format!("{}: {} {} lines", self.1, sig.ident, to + 1 - from));
        }
    }
}

#[test]
fn no_function_spans_more_than_its_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut long = LongFns::default();
    for f in files.iter().filter(|f| !is_test_file(f)) {
        long.1 = f.strip_prefix(root).unwrap().display().to_string();
        let file = syn::parse_file(&std::fs::read_to_string(f).unwrap()).unwrap();
        long.visit_file(&file);
    }
    assert!(
        long.0.is_empty(),
        "at most {FN_LINES} lines a function: split it into named steps:\n{}",
        long.0.join("\n")
    );
}
