//! oscost as a library: the measurement engine, the benchmark catalogue, the result model and
//! its views. The `oscost` binary (`main.rs`) is a thin command-line front end over it; the
//! library form lets integration tests drive statistics, reports and comparisons directly.
#![warn(missing_docs)]
// Functions within 80 code lines (clippy.toml): a rule of the house, kept by the lint.
#![warn(clippy::too_many_lines)]

/// `eprintln!` that never panics (`text::say`).
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => { $crate::base::text::say(format_args!($($t)*), true) };
}

/// `eprint!` that never panics (`text::say`).
#[macro_export]
macro_rules! say_part {
    ($($t:tt)*) => { $crate::base::text::say(format_args!($($t)*), false) };
}

/// `println!` for a helper's line protocol, never panicking (`text::tell`).
#[macro_export]
macro_rules! tell {
    ($($t:tt)*) => { $crate::base::text::tell(format_args!($($t)*), true) };
}

/// `print!` for a helper's line protocol, never panicking (`text::tell`).
#[macro_export]
macro_rules! tell_part {
    ($($t:tt)*) => { $crate::base::text::tell(format_args!($($t)*), false) };
}

/// Every allocation goes through the emergency reserve (`reserve`).
#[global_allocator]
static ALLOCATOR: base::reserve::Reserve = base::reserve::Reserve;

pub mod analysis;
pub mod base;
pub mod bench;
pub mod cli;
pub mod effects;
pub mod machine;
pub mod measuring;
pub mod processes;
pub mod report;
pub mod tracing;
