//! One module per `uraid` verb.

pub mod assemble;
mod assemble_read;
pub mod bench;
pub mod build;
mod control_client;
pub mod create;
mod demo;
pub mod examine;
mod examine_badblocks;
mod examine_bitmap;
pub mod grow;
pub mod manage;
mod md_meta;
mod mdadm_config;
pub mod monitor;
mod monitor_mail;
mod monitor_spares;
mod output;
mod progress;
mod scan;
pub mod scrub;
pub mod serve;
mod serving;
pub mod stats;
pub mod status;
mod watch;
pub mod zero;
