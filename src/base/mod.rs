//! The bottom of the house: what every layer may use and that uses nothing of oscost's
//! own above it. Statistics (`stats`), the result model (`model`, over `stats`), the
//! stored form of samples (`sample_codec`), text made safe to show (`text`) and the
//! emergency memory reserve (`reserve`).

pub mod model;
pub mod reserve;
pub mod sample_codec;
pub mod stats;
pub mod text;
