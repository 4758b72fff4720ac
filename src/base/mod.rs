//! The bottom of the house: what every layer may use and that uses nothing of oscost's
//! own above it. Statistics (`stats`), the result model (`model`, over `stats`), the
//! stored form of samples (`sample_codec`), text made safe to show (`text`), the
//! emergency memory reserve (`reserve`) and whether a signal asked to stop (`stop`).

pub mod helpers;
pub mod model;
pub mod reserve;
pub mod sample_codec;
pub mod stats;
pub mod stop;
pub mod text;
