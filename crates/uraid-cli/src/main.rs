//! `uraid`: userspace RAID 4/5/6 with md's on-disk layout, driven with md's verbs.
//!
//! One subcommand per file under `cmd/`; flags shared between verbs live in `args.rs`.

/// `eprintln!` that never panics. eprintln! panics when stderr is gone (a closed pipe:
/// EPIPE, since Rust ignores SIGPIPE); in a serve whose log reader went away that killed the
/// signal thread at its first message, and SIGTERM then went unheard (seen with `| head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that never panics, for what a long-running serve prints (see `say!`).
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `println!` for the short verbs' output. `println!` panicked ("failed printing to stdout:
/// Broken pipe", exit 101) when the reader had gone (`uraid status | head -1`: Rust ignores
/// SIGPIPE); this ends the process quietly with the status a shell shows for SIGPIPE, as
/// `ls | head` ends. SIGPIPE itself stays ignored: a write to a closed socket must come back
/// as an error, not kill the process.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            crate::stdout_failed(&e);
        }
    }};
}

/// `print!` as `out!` does `println!`.
macro_rules! out_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($arg)*) {
            crate::stdout_failed(&e);
        }
    }};
}

mod args;
mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc, not glibc's malloc: the engine allocates and frees request and block buffers of
/// a few KiB on every request, and glibc gave the freed heap top back to the kernel and
/// faulted it in again (page faults and page clearing in profiles of the write path).
/// `uraid bench io --only cpu`'s log_cpu rows, runs alternated with a glibc build (the third
/// session of 2026-11-29; `docs/write-hole.md`): CPU per 4 KiB random write on
/// RAID5 12.0 -> 7.8 us without the log, 18.6 -> 13.3 us with it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Idle(cmd::scrub::IdleArgs),
    Freeze(cmd::scrub::FreezeArgs),
    Wait(cmd::scrub::WaitArgs),
    Stop(cmd::manage::StopArgs),
    Grow(cmd::grow::GrowArgs),
    SyncSpeed(cmd::manage::SyncSpeedArgs),
    Monitor(cmd::monitor::MonitorArgs),
    ZeroSuperblock(cmd::zero::ZeroArgs),
    Serve(cmd::serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A wide array takes more descriptors than the usual soft limit (`uraid_io::fd_limit`);
    // failing to raise it leaves the limit as it was, and an open that meets it says so.
    let _ = uraid_io::fd_limit::raise_open_files_limit();
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
        Command::Idle(a) => cmd::scrub::run_idle(&a),
        Command::Freeze(a) => cmd::scrub::run_freeze(&a),
        Command::Wait(a) => cmd::scrub::run_wait(&a),
        Command::Stop(a) => cmd::manage::run_stop(&a),
        Command::Grow(a) => cmd::grow::run(&a),
        Command::SyncSpeed(a) => cmd::manage::run_sync_speed(&a),
        Command::Monitor(a) => cmd::monitor::run(&a),
        Command::ZeroSuperblock(a) => cmd::zero::run(&a),
        Command::Serve(a) => cmd::serve::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            say!("uraid: error: {}", error_text(&err));
            ExitCode::FAILURE
        }
    }
}

/// Standard output failed under `out!`: its reader went away (exit 141, a shell's 128 +
/// SIGPIPE, with nothing said), or another error (said, exit 1).
fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    say!("uraid: error: writing standard output: {e}");
    std::process::exit(1)
}

/// The error and its causes, as anyhow's `{:#}` prints them, less a cause whose text the
/// message before it already ends with (errors like "assembly refused: {0}" quote their
/// source, and `{:#}` would print it twice).
fn error_text(err: &anyhow::Error) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if !text.is_empty() && text.ends_with(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    let out_of_files = err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(uraid_io::fd_limit::is_out_of_files)
    });
    if out_of_files && !text.contains("ulimit -n") {
        let _ = write!(text, " ({})", uraid_io::fd_limit::out_of_files_hint());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;

    use std::fmt;

    /// An error that quotes its source in its message, as thiserror's "...: {0}" does.
    #[derive(Debug)]
    struct Quoting(Inner);
    impl fmt::Display for Quoting {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "assembly refused: {}", self.0)
        }
    }
    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[derive(Debug)]
    struct Inner;
    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("slots [3] are missing")
        }
    }
    impl std::error::Error for Inner {}

    #[test]
    fn a_cause_the_message_already_quotes_is_printed_once() {
        let err = anyhow::Error::new(Quoting(Inner)).context("cannot start the array");
        assert_eq!(
            error_text(&err),
            "cannot start the array: assembly refused: slots [3] are missing"
        );
        let plain = anyhow::Error::new(Inner).context("cannot start the array");
        assert_eq!(error_text(&plain), "cannot start the array: slots [3] are missing");
    }
}
