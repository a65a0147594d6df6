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
    Detail(cmd::status::DetailArgs),
    Status(cmd::status::StatusArgs),
    Fail(cmd::manage::FailArgs),
    Remove(cmd::manage::RemoveArgs),
    Add(cmd::manage::AddArgs),
    Replace(cmd::manage::ReplaceArgs),
    Check(cmd::scrub::CheckArgs),
    Repair(cmd::scrub::RepairArgs),
    Stop(cmd::manage::StopArgs),
    SyncSpeed(cmd::manage::SyncSpeedArgs),
    Serve(cmd::serve::ServeArgs),
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
        Command::Detail(a) => cmd::status::run_detail(&a),
        Command::Status(a) => cmd::status::run_status(&a),
        Command::Fail(a) => cmd::manage::run_fail(&a),
        Command::Remove(a) => cmd::manage::run_remove(&a),
        Command::Add(a) => cmd::manage::run_add(&a),
        Command::Replace(a) => cmd::manage::run_replace(&a),
        Command::Check(a) => cmd::scrub::run_check(&a),
        Command::Repair(a) => cmd::scrub::run_repair(&a),
        Command::Stop(a) => cmd::manage::run_stop(&a),
        Command::SyncSpeed(a) => cmd::manage::run_sync_speed(&a),
        Command::Serve(a) => cmd::serve::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("uraid: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
