//! oscost as a library: the measurement engine, the benchmark catalogue, the result model and
//! its views. The `oscost` binary (`main.rs`) is a thin command-line front end over it; the
//! library form lets integration tests drive statistics, reports and comparisons directly.
#![warn(missing_docs)]

/// `eprintln!` that never panics (`text::say`).
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => { $crate::text::say(format_args!($($t)*), true) };
}

/// `eprint!` that never panics (`text::say`).
#[macro_export]
macro_rules! say_part {
    ($($t:tt)*) => { $crate::text::say(format_args!($($t)*), false) };
}

/// `println!` for a helper's line protocol, never panicking (`text::tell`).
#[macro_export]
macro_rules! tell {
    ($($t:tt)*) => { $crate::text::tell(format_args!($($t)*), true) };
}

/// `print!` for a helper's line protocol, never panicking (`text::tell`).
#[macro_export]
macro_rules! tell_part {
    ($($t:tt)*) => { $crate::text::tell(format_args!($($t)*), false) };
}

/// Every allocation goes through the emergency reserve (`reserve`).
#[global_allocator]
static ALLOCATOR: reserve::Reserve = reserve::Reserve;

pub mod analysis;
pub mod bench;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod env;
pub mod gate;
pub mod harness;
pub mod matrix;
pub mod model;
pub mod output;
pub mod program;
pub mod put_back;
pub mod report;
pub mod reserve;
pub mod sample_codec;
pub mod scheduler;
pub mod scratch;
pub mod select;
pub mod settings_guard;
pub mod signals;
pub mod stats;
pub mod store;
pub mod text;
pub mod worker;
