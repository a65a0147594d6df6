//! `uraid`: userspace RAID 4/5/6 with md's on-disk layout, driven with md's verbs.
//!
//! One subcommand per file under `cmd/`; flags shared between verbs live in `args.rs`.

mod args;
mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "uraid", version, about = "Userspace RAID 4/5/6 with Linux md's on-disk layout")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Create(cmd::create::CreateArgs),
    Assemble(cmd::assemble::AssembleArgs),
    Examine(cmd::examine::ExamineArgs),
    Build(cmd::build::BuildArgs),
    Stats(cmd::stats::StatsArgs),
    Bench(cmd::bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Create(a) => cmd::create::run(&a),
        Command::Assemble(a) => cmd::assemble::run(&a),
        Command::Examine(a) => cmd::examine::run(&a),
        Command::Build(a) => cmd::build::run(&a),
        Command::Stats(a) => cmd::stats::run(&a),
        Command::Bench(a) => cmd::bench::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("uraid: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
