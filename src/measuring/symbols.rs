//! Instruction addresses to function names, for a profile taken in this process
//! (`measuring::profile`): the kernel's and its modules' from /proc/kallsyms (JIT-compiled BPF
//! programs are listed there as `bpf_prog_<tag>_<name> [bpf]` where
//! `net.core.bpf_jit_kallsyms` is on), user space's from this process's mappings
//! (/proc/self/maps) and each mapped file's ELF symbol tables, read with the `object` crate
//! and demangled with `rustc-demangle`; the vDSO from its image in memory. Everything is read
//! once a process and kept: a worker resolves its samples after its profiled passes.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::base::model::profile::Space;

/// A sorted table of (start address, name).
#[derive(Debug, Default)]
struct Table {
    starts: Vec<u64>,
    names: Vec<String>,
    /// Where each entry lives (kallsyms: kernel or bpf).
    spaces: Vec<Space>,
    /// The end of the kernel image's text (`_einittext`, else `_etext`; the top without
    /// either): core symbols name nothing past it.
    image_end: u64,
}

impl Table {
    /// From rows; of several names at one address the first given is kept (`kallsyms_rows`
    /// puts the global one first).
    fn from(mut rows: Vec<(u64, String, Space)>) -> Table {
        rows.sort_by_key(|r| r.0);
        rows.dedup_by_key(|r| r.0);
        let mut t = Table {
            image_end: u64::MAX,
            ..Table::default()
        };
        let end_of = |name: &str| rows.iter().find(|r| r.1 == name).map(|r| r.0);
        if let Some(end) = end_of("_einittext").or_else(|| end_of("_etext")) {
            t.image_end = end;
        }
        for (a, n, s) in rows {
            t.starts.push(a);
            t.names.push(n);
            t.spaces.push(s);
        }
        t
    }

    /// The entry at or below `addr`.
    fn at(&self, addr: u64) -> Option<(&str, Space)> {
        let i = self.starts.partition_point(|&s| s <= addr).checked_sub(1)?;
        Some((&self.names[i], self.spaces[i]))
    }
}

/// The lowest kernel address on x86-64 and arm64 (the upper half).
const KERNEL_HALF: u64 = 0x8000_0000_0000_0000;

/// Whether `addr` is a kernel address.
pub fn in_kernel(addr: u64) -> bool {
    addr >= KERNEL_HALF
}

/// How names at one address are ordered: (address, local, leading underscores, length).
type Rank = (u64, bool, usize, usize);

fn kallsyms() -> &'static Option<Table> {
    static K: OnceLock<Option<Table>> = OnceLock::new();
    K.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
        let mut ranked: Vec<(Rank, (u64, String, Space))> = text
            .lines()
            .filter_map(|line| {
                let local = line
                    .split_whitespace()
                    .nth(1)
                    .is_some_and(|t| t == "t" || t == "w");
                let r = kallsyms_row(line)?;
                let underscores = r.1.len() - r.1.trim_start_matches('_').len();
                Some(((r.0, local, underscores, r.1.len()), r))
            })
            .collect();
        // Of the names at one address, the one perf shows: a global one before a local one
        // (`__x64_sys_getppid`, not the inlined `__do_sys_getppid`), then fewer leading
        // underscores, then the shorter. `Table::from` keeps the first of each address.
        ranked.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.1.cmp(&b.1.1)));
        let rows: Vec<(u64, String, Space)> = ranked.into_iter().map(|x| x.1).collect();
        // Without the privilege to see addresses every one reads 0.
        (!rows.is_empty()).then(|| Table::from(rows))
    })
}

/// One line of /proc/kallsyms (`ADDR TYPE NAME [MODULE]`) as a text symbol, or `None`.
fn kallsyms_row(line: &str) -> Option<(u64, String, Space)> {
    let mut it = line.split_whitespace();
    let addr = u64::from_str_radix(it.next()?, 16)
        .ok()
        .filter(|&a| a != 0)?;
    let kind = it.next()?;
    if !matches!(kind, "t" | "T" | "w" | "W") {
        return None;
    }
    let name = it.next()?;
    Some(match it.next() {
        Some("[bpf]") => (addr, format!("{name} [bpf]"), Space::Bpf),
        Some(m) => (addr, format!("{name} {m}"), Space::Kernel),
        None => (addr, name.to_string(), Space::Kernel),
    })
}

/// What code kallsyms does not name past the kernel image's end is: JIT-compiled BPF that is
/// not listed (a seccomp filter's, a classic socket filter's, or any with
/// `net.core.bpf_jit_kallsyms` 0).
pub const UNNAMED_JIT: &str = "[BPF JIT code kallsyms does not name: a seccomp filter's?]";

/// A kernel address's function: from kallsyms, or "[kernel]" where it lists none. kallsyms
/// gives no sizes, so an address past the image's last symbol would take that symbol's name
/// (`_einittext`): there it is JIT code kallsyms does not list, and said so.
pub fn kernel(addr: u64) -> (String, Space) {
    match kallsyms().as_ref() {
        Some(t) => t.kernel_name(addr),
        None => ("[kernel]".into(), Space::Kernel),
    }
}

impl Table {
    /// `kernel`'s answer from this table.
    fn kernel_name(&self, addr: u64) -> (String, Space) {
        match self.at(addr) {
            // A core symbol (no module) past the image's end names nothing there.
            Some((n, s)) if s == Space::Kernel && !n.contains(' ') && addr >= self.image_end => {
                (UNNAMED_JIT.into(), Space::Bpf)
            }
            Some((n, s)) => (n.to_string(), s),
            None => ("[kernel]".into(), Space::Kernel),
        }
    }
}

/// Whether kallsyms gave addresses here (root, or kernel.kptr_restrict 0).
pub fn kernel_named() -> bool {
    kallsyms().is_some()
}

/// One mapping of this process: its addresses, file offset and what it maps.
#[derive(Debug)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

fn mappings() -> Vec<Mapping> {
    let Ok(text) = std::fs::read_to_string("/proc/self/maps") else {
        return vec![];
    };
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (s, e) = it.next()?.split_once('-')?;
            let perms = it.next()?;
            let offset = u64::from_str_radix(it.next()?, 16).ok()?;
            let path = it.nth(2).unwrap_or("").to_string();
            perms.contains('x').then_some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset,
                path,
            })
        })
        .collect()
}

/// One mapped file's functions: (virtual address in the file, size, name), and its loaded
/// segments (file offset, size, virtual address) to turn a file offset into one.
#[derive(Debug, Default)]
struct Image {
    functions: Vec<(u64, u64, String)>,
    segments: Vec<(u64, u64, u64)>,
}

impl Image {
    fn parse(data: &[u8]) -> Option<Image> {
        let file = object::File::parse(data).ok()?;
        let mut functions: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
            .collect();
        functions.sort_by_key(|f| f.0);
        functions.dedup_by_key(|f| f.0);
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        Some(Image {
            functions,
            segments,
        })
    }

    /// The function at file offset `off`.
    fn at_offset(&self, off: u64) -> Option<String> {
        let &(seg_off, _, vaddr) = self
            .segments
            .iter()
            .find(|(o, size, _)| off >= *o && off < o + size)?;
        let va = off - seg_off + vaddr;
        let i = self
            .functions
            .partition_point(|f| f.0 <= va)
            .checked_sub(1)?;
        let (start, size, name) = &self.functions[i];
        // A zero size (hand-written assembly) is taken to reach the next symbol.
        (*size == 0 || va < start + size).then(|| demangled(name))
    }
}

/// A Rust or C name as a person reads it: Rust's without its hash.
fn demangled(name: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(name))
}

/// This process's user-space resolver: its mappings and their images, read once.
#[derive(Debug, Default)]
pub struct UserSymbols {
    maps: Vec<Mapping>,
    images: BTreeMap<String, Option<Image>>,
}

impl UserSymbols {
    /// The mappings as they are now (after the profiled passes: what they ran in).
    pub fn now() -> UserSymbols {
        UserSymbols {
            maps: mappings(),
            images: BTreeMap::new(),
        }
    }

    /// A user address's function: "name", or "[file]" where its file has no symbol for it.
    pub fn resolve(&mut self, addr: u64) -> String {
        let Some(m) = self.maps.iter().find(|m| addr >= m.start && addr < m.end) else {
            return "[user]".into();
        };
        let off = addr - m.start + m.offset;
        let path = m.path.clone();
        let image = self
            .images
            .entry(path.clone())
            .or_insert_with(|| load_image(&path, m.start, m.end));
        let short = path.rsplit('/').next().unwrap_or(&path).to_string();
        match image.as_ref().and_then(|i| i.at_offset(off)) {
            Some(name) => name,
            None if short.is_empty() => "[user]".into(),
            None => format!("[{short}]"),
        }
    }
}

fn load_image(path: &str, start: u64, end: u64) -> Option<Image> {
    if path == "[vdso]" {
        let len = usize::try_from(end - start).ok()?;
        // SAFETY: the vDSO is mapped readable at [start, end) for the life of the process,
        // by the kernel, and nothing writes it; the slice is read here and dropped.
        let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, len) };
        return Image::parse(bytes);
    }
    if !path.starts_with('/') {
        return None;
    }
    Image::parse(&std::fs::read(path).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_rows_name_text_symbols_modules_and_bpf_programs() {
        assert_eq!(
            kallsyms_row("ffffffff81001000 T do_syscall_64"),
            Some((0xffffffff81001000, "do_syscall_64".into(), Space::Kernel))
        );
        assert_eq!(
            kallsyms_row("ffffffffc0001000 t bpf_prog_6deef7357e7b4530_sd_fw\t[bpf]"),
            Some((
                0xffffffffc0001000,
                "bpf_prog_6deef7357e7b4530_sd_fw [bpf]".into(),
                Space::Bpf
            ))
        );
        assert_eq!(
            kallsyms_row("ffffffffc0002000 t vfat_lookup\t[vfat]").map(|r| r.1),
            Some("vfat_lookup [vfat]".into())
        );
        // Data, and addresses hidden from the unprivileged, are not functions.
        assert_eq!(kallsyms_row("ffffffff82000000 D jiffies"), None);
        assert_eq!(kallsyms_row("0000000000000000 T do_syscall_64"), None);
    }

    #[test]
    fn a_table_finds_the_entry_at_or_below() {
        let t = Table::from(vec![
            (200, "b".into(), Space::Kernel),
            (100, "a".into(), Space::Kernel),
        ]);
        assert_eq!(t.at(150).map(|x| x.0), Some("a"));
        assert_eq!(t.at(200).map(|x| x.0), Some("b"));
        assert_eq!(t.at(99), None);
    }

    #[test]
    fn code_past_the_kernel_image_that_kallsyms_does_not_list_is_unnamed_jit() {
        let t = Table::from(vec![
            (100, "do_syscall_64".into(), Space::Kernel),
            (500, "_einittext".into(), Space::Kernel),
            (900, "vfat_lookup [vfat]".into(), Space::Kernel),
        ]);
        assert_eq!(t.kernel_name(120).0, "do_syscall_64");
        assert_eq!(t.kernel_name(700), (UNNAMED_JIT.to_string(), Space::Bpf));
        assert_eq!(t.kernel_name(950).0, "vfat_lookup [vfat]");
    }

    #[inline(never)]
    fn a_function_of_this_binary() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn this_binarys_own_function_is_named_from_its_address() {
        let addr = a_function_of_this_binary as *const () as u64;
        assert_eq!(a_function_of_this_binary(), 7);
        let name = UserSymbols::now().resolve(addr + 1);
        assert!(
            name.ends_with("a_function_of_this_binary"),
            "resolved to {name}"
        );
        assert!(!in_kernel(addr));
    }
}
