//! oscost: measure what the operating system charges for its primitives.
//!
//! `main` parses the command line, dispatches, and is the one error boundary: a usage error
//! exits 2, an interrupt 128 + signal, any other error 1, each with one line on stderr.
#![warn(clippy::too_many_lines)]

use oscost::base::helpers;
use oscost::base::stop::Interrupted;
use oscost::base::text::printable;
use oscost::cli::Cli;
use oscost::cli::commands::args::UsageError;
use oscost::effects::signals::InterruptedAfterSave;

/// The stack the command runs on, whatever RLIMIT_STACK gives the main thread (under
/// `prlimit --stack=32768` argument parsing alone overflowed it).
const STACK_BYTES: usize = 8 << 20;

/// An address-space limit below this runs the command on the main thread (see `main`).
const SMALL_ADDRESS_SPACE: u64 = 256 << 20;

/// How much of the main thread's stack is made to exist before the command runs under a
/// small address-space limit.
const STACK_GROWN_BYTES: usize = 1 << 20;

/// Zero-filled memory that gives every build of oscost the same mappings. The kernel maps the
/// zero-filled tail of the last data segment (`.bss`) as an anonymous mapping of its own only
/// when that tail runs past the page the file's data ends in, which depends on where code size
/// happened to put the segment: with the 1,688-byte tail oscost had, about 4 builds in 10 had
/// one mapping more than the rest (tests/scale.rs checks the tail now passes a page). One mapping
/// more or less moves the kernel's maple tree nodes, and a thread of a process mapping and
/// unmapping 128 MiB (`scale/mmap-anon`, will-it-scale's mmap1) ran 1.5x dearer in one build
/// than in the next with no change to its code (docs/design-notes.md, "scale/ mmap1 in
/// threads"). More than a page of zeros makes the tail always run past it.
static BSS_TAIL: [std::sync::atomic::AtomicU8; BSS_TAIL_BYTES] =
    [const { std::sync::atomic::AtomicU8::new(0) }; BSS_TAIL_BYTES];

/// Bytes of `BSS_TAIL`: two pages, more than the one needed, whatever the page size up to 8 KiB.
const BSS_TAIL_BYTES: usize = 8192;

/// Touch `STACK_GROWN_BYTES` of the main thread's stack now, so the kernel maps it while
/// address space is left. A stack grows as it is used, and growing it when the heap has taken
/// the rest of a `ulimit -v` is a SIGSEGV, not an allocation failure the reserve could answer:
/// a debug build's deflate encoder (`store::encode`) builds its 100 KB tables on the stack
/// and died there under 25-29 MB limits.
#[inline(never)]
fn grow_stack() {
    let mut pages = [0u8; STACK_GROWN_BYTES];
    std::hint::black_box(&mut pages);
}

/// A helper's entry: its arguments after its name, its exit code.
type Entry = fn(&[String]) -> i32;

/// The helper processes oscost starts from its own binary (`base::helpers`), each with its
/// entry: single-threaded, without the clap tree, the gate or the address-space reserve.
const HELPERS: [(&str, Entry); 6] = [
    (helpers::WORKER, worker),
    (helpers::GUARD, oscost::effects::put_back::guard_main),
    (helpers::KEEPER, oscost::processes::during::keeper_main),
    (helpers::TRACEFS, tracefs),
    (helpers::AUDIT_RULE, oscost::tracing::audit::helper_main),
    (helpers::FTRACE, oscost::tracing::ftrace::helper_main),
];

/// A measuring worker. Its parent-death signal is the main thread's attribute, set to SIGKILL
/// by the coordinator before exec; it must be SIGTERM, whose handler removes the worker's SysV
/// objects, before any other thread exists. A worker measures on its main thread: a second
/// thread, even one asleep in join, made fork 35-45% dearer (a multi-threaded parent's fork
/// does more work) and the process is no longer the single-threaded one the benchmarks define.
/// Its arguments come from the coordinator: no clap tree, no gate, no reserve mapping (one
/// more mapping would be one more for fork to copy). Other arguments are the hidden `__worker`
/// command's to refuse.
fn worker(args: &[String]) -> i32 {
    oscost::measuring::ipc_guard::on_parent_death();
    match args {
        [id, config] => oscost::processes::worker::worker_main(id, config),
        _ => run(),
    }
}

/// Mounting tracefs in a mount namespace of its own needs a single-threaded process.
fn tracefs(_: &[String]) -> i32 {
    oscost::tracing::tracefs::helper_main()
}

fn main() {
    // Kept in the binary (nothing else refers to it); never written, so it costs no memory.
    std::hint::black_box(&BSS_TAIL);
    // A helper process (`base::helpers`): its entry, before any other thread, mapping or
    // parser exists. The arguments are read once, here.
    let mut args = std::env::args_os();
    if let Some(first) = args.nth(1)
        && let Some((_, entry)) = HELPERS.iter().find(|(name, _)| first == **name)
    {
        let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        std::process::exit(entry(&rest));
    }
    // Address space held back for the moment memory runs short after measuring (`reserve`):
    // the command's process only, not its workers and helpers.
    oscost::base::reserve::arm(oscost::base::reserve::RESERVE_BYTES);
    // Under a small address-space limit (`ulimit -v`) an 8 MiB stack mapped whole would take
    // what the heap needs: the main thread's stack, which grows as used, serves instead.
    let small_as = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS)
        .is_ok_and(|(soft, _)| soft < SMALL_ADDRESS_SPACE);
    if small_as {
        // The stack's room (and a margin), asked of the system as the reserve asks it: where
        // an allocation that size fails, a stack growing that far would take a SIGSEGV.
        if !oscost::base::reserve::room_for(STACK_GROWN_BYTES + (256 << 10)) {
            oscost::say!(
                "oscost: the address-space limit (ulimit -v) leaves no room for oscost's stack; raise it"
            );
            std::process::exit(2);
        }
        grow_stack();
        std::process::exit(run());
    }
    let code = match std::thread::Builder::new()
        .name("oscost".into())
        .stack_size(STACK_BYTES)
        .spawn(run)
    {
        Ok(h) => h.join().unwrap_or(101),
        // No thread to be had (RLIMIT_NPROC reached): the main thread's stack it is, so that
        // the command can still say what it could not do.
        Err(_) => run(),
    };
    std::process::exit(code);
}

fn run() -> i32 {
    let args = oscost::cli::join_hyphen_values(std::env::args_os().collect());
    let cli = match Cli::parse_args(args) {
        Ok(c) => c,
        Err(e) => return clap_error(e),
    };
    let code = match cli.dispatch() {
        Ok(code) => code,
        Err(e) => exit_status(&e),
    };
    if oscost::base::reserve::spent() {
        oscost::say!(
            "oscost: memory ran short (a limit such as `ulimit -v`, or the machine's): oscost used its emergency reserve to finish; give it more memory"
        );
    }
    code
}

/// Help and version print as clap prints them (exit 0); a usage error is one line (exit 2).
fn clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            2
        } else {
            0
        };
    }
    // clap's message is its first paragraph (for a missing argument, the argument is on the
    // next lines); usage and tips follow after a blank line.
    let text = e.render().to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let first = first.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    oscost::say!("oscost: {} (see --help)", one_line(first));
    2
}

/// An error as one printable line: a newline inside it (an id read from a file, a label) is
/// shown as `\n`, so the message stays the one line the exit status goes with.
fn one_line(text: &str) -> String {
    printable(text).replace('\n', "\\n")
}

/// Say what went wrong in one line and give the exit status it means.
fn exit_status(e: &anyhow::Error) -> i32 {
    if let Some(i) = e.downcast_ref::<InterruptedAfterSave>() {
        oscost::say!(
            "oscost: {e}; what was left to write was not written, and no process oscost started is left"
        );
        128 + i.signal
    } else if let Some(i) = e.downcast_ref::<Interrupted>() {
        oscost::say!("oscost: {e}; nothing was saved and no process oscost started is left");
        128 + i.0
    } else if e.downcast_ref::<UsageError>().is_some() {
        oscost::say!("oscost: {}", one_line(&e.to_string()));
        2
    } else {
        oscost::say!("oscost: {}", one_line(&format!("{e:#}")));
        1
    }
}
