//! One module per `uraid` verb.

pub mod assemble;
mod assemble_read;
pub mod bench;
pub mod build;
pub mod create;
pub mod examine;
mod md_meta;
pub mod stats;
