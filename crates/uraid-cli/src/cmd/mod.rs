//! One module per `uraid` verb.

pub mod bench;
pub mod build;
