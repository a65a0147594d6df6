//! `uraid monitor`'s spare moves (mdadm's spare groups): the moves `uraid_md::spare_groups`
//! calls for, made over the arrays' control sockets as mdadm makes them: the spare removed
//! from the array that has it, added to the degraded one (which rebuilds onto it), and given
//! back when the add is refused (too small, say), the next candidate tried then.

use crate::cmd::control_client::send_ok;
use anyhow::{Context as _, bail};
use std::collections::BTreeSet;
use std::fs::File;
use uraid_md::control::{ControlRequest, run_dir};
use uraid_md::mdadm_conf::MdadmConf;
use uraid_md::monitor::Event;
use uraid_md::spare_groups::{Donation, spare_moves};
use uraid_md::status::ArrayStatus;

/// The moves made so far; what each array refused.
pub struct SpareMover {
    /// (array, spare) pairs whose add was refused: not tried again while this monitor runs,
    /// so that a spare too small for an array is not taken from its own and given back at
    /// every look (mdadm checks the size first; uraid leaves that to the add it would make).
    refused: BTreeSet<(String, String)>,
    /// Held while this monitor moves spares: one monitor does, as mdadm allows one (its
    /// autorebuild pid file); two would take two spares for one lost member.
    _lock: Option<File>,
}

impl SpareMover {
    /// A mover for `conf`'s spare groups; with none, one that never moves (and locks nothing).
    ///
    /// # Errors
    /// Another monitor moves spares already (it holds the lock in the run directory).
    pub fn for_config(conf: &MdadmConf) -> anyhow::Result<SpareMover> {
        let groups = conf.arrays.iter().any(|a| a.spare_group.is_some());
        let lock = if groups { Some(lock()?) } else { None };
        Ok(SpareMover { refused: BTreeSet::new(), _lock: lock })
    }

    /// Makes this look's moves; a MoveSpare event for each one made. What went wrong is said
    /// on stderr and the monitor goes on (the next look tries again, but not a refused pair).
    pub fn move_spares(&mut self, statuses: &[ArrayStatus], conf: &MdadmConf) -> Vec<Event> {
        let mut moved = BTreeSet::new();
        let mut events = Vec::new();
        for planned in spare_moves(statuses, conf) {
            let to = &planned.to;
            for donation in &planned.candidates {
                let pair = (to.clone(), donation.spare.clone());
                if moved.contains(&donation.spare) || self.refused.contains(&pair) {
                    continue;
                }
                match move_one(donation, to) {
                    Moved::Yes => {
                        moved.insert(donation.spare.clone());
                        events.push(Event::move_spare(to, &donation.from));
                        break;
                    }
                    Moved::Refused => {
                        self.refused.insert(pair);
                    }
                    Moved::NotTaken => {}
                }
            }
        }
        events
    }
}

enum Moved {
    Yes,
    /// The array it was for refused it.
    Refused,
    /// Not moved this time (its array would not let it go, or the other did not answer).
    NotTaken,
}

/// One spare from `donation.from` to `to`.
fn move_one(donation: &Donation, to: &str) -> Moved {
    let Donation { from, spare } = donation;
    let remove = ControlRequest::Remove { member: spare.clone() };
    if let Err(why) = send_ok(from, &remove, false) {
        say!("uraid monitor: moving spare {spare} from {from} to {to}: {why:#}");
        return Moved::NotTaken;
    }
    // The spare still carries its old array's superblock, hence force: this monitor just
    // took it from that array.
    let Err(why) = send_ok(to, &ControlRequest::Add { path: spare.clone(), force: true }, false)
    else {
        return Moved::Yes;
    };
    say!("uraid monitor: moving spare {spare} from {from} to {to}: {why:#}; giving it back");
    if let Err(back) =
        send_ok(from, &ControlRequest::Add { path: spare.clone(), force: false }, false)
    {
        say!(
            "uraid monitor: {spare} is in neither array now ({back:#}): \
             `uraid add {from} {spare}` gives it back"
        );
    }
    // Refused by the array, or not answered (a stop under way): only a refusal is kept.
    match why.downcast_ref::<std::io::Error>() {
        Some(_) => Moved::NotTaken,
        None => Moved::Refused,
    }
}

/// `$URAID_RUN_DIR/monitor-spares.lock`, locked for this process's life (the OS lets go of
/// it when the process ends, however it ends).
fn lock() -> anyhow::Result<File> {
    let dir = run_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("monitor-spares.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "another uraid monitor moves spares between arrays already (it holds {}): one \
             may, as in mdadm",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}
