//! Goal: the lifecycle verbs, run one after another on random members while clients read and
//! write, lose nothing and never return wrong data: a member pulled (its I/Os fail) or failed
//! by `fail`, removed and taken back by re-add or replaced by a spare, and md's replace, with
//! the member sometimes failing during its copy. `uraid-runtime`'s `lifecycle_chaos` drives the
//! runtime alone; here the monitor, the sync thread and the metadata take part, as in
//! `uraid serve`. Its first runs found a good replacement failed after its takeover by the
//! member's late errors (`uraid_io::Replacing`).
//!
//! Method: a RAID6 of 6 files with a write-intent bitmap (one worker) and the partial parity
//! log. Three clients each own a region and check every read against a model while a chaos
//! thread runs ten rounds, each on a member picked from a seed, of in turn: fail, remove, a
//! pause (0-50 ms), `add` of the same device (a re-add); pull (every later I/O of the device
//! fails, so the engine fails it), remove, `add` of a new device (a spare, rebuilt whole);
//! `replace` with a new device; the same with the member pulled 0-100 ms into the copy; a
//! re-add, and 0-100 ms into its recovery another member failed, removed and re-added. Each
//! round waits for the sync process to go idle and must leave the array whole. At the end it
//! must read back as the model, pass a check, and read the same with two members failed.
//! Then the same without a bitmap, on two workers (a device that comes back is a spare).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uraid_io::{Member, Pullable};
use uraid_md::members::MemberFaults;
use uraid_md::{MdArray, MdOptions};
use uraid_runtime::Runtime;

mod common;
use common::{MEMBER_BYTES, Rng, assert_same, fill, make_array, reads_with_two_failed, tempdir};

const WAIT: Duration = Duration::from_secs(120);
const CLIENTS: u64 = 3;
const ROUNDS: usize = 10;

/// The pull flags of the device instances open, by path (a new instance gets its own).
#[derive(Default)]
struct Pulls(Mutex<Vec<(String, Arc<AtomicBool>)>>);

impl Pulls {
    /// The device at `path` fails every I/O sent from now on (a device opened there later
    /// does not).
    fn pull(&self, path: &str) {
        let mut open = self.0.lock().unwrap();
        for (_, flag) in open.iter().filter(|(p, _)| p == path) {
            flag.store(true, Ordering::Release);
        }
        open.retain(|(p, _)| p != path);
    }

    fn faults(self: &Arc<Self>) -> MemberFaults {
        let pulls = self.clone();
        MemberFaults(Arc::new(move |_slot, file| {
            let flag = Arc::new(AtomicBool::new(false));
            pulls.0.lock().unwrap().push((file.info().name.clone(), flag.clone()));
            Box::new(Pullable::new(Box::new(file), flag))
        }))
    }
}

fn new_device(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(MEMBER_BYTES).unwrap();
    p
}

#[test]
fn lifecycle_verbs_on_random_members_under_clients() {
    chaos("lifecycle-chaos", Some(64 << 10), None);
}

/// Without a bitmap: a member that comes back is a spare, rebuilt whole, and the engine runs
/// on two workers (an array with a bitmap has one). Its first runs found three ways to lose
/// writes (see `Array::note_recovered` and `Runtime::fail_member_now`).
#[test]
fn lifecycle_verbs_without_a_bitmap_on_two_workers() {
    chaos("lifecycle-chaos-nobitmap", None, Some(2));
}

fn chaos(name: &str, bitmap_chunk_bytes: Option<u32>, workers: Option<usize>) {
    // A request that never completes must fail the test, not hang CI: it takes ten seconds.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(600));
        eprintln!("lifecycle_chaos: still running after 600 s: a request or a verb is stuck");
        std::process::abort();
    });
    let dir = tempdir(name);
    let mut slots = make_array(dir.path(), 6, bitmap_chunk_bytes);
    let pulls = Arc::new(Pulls::default());
    let options =
        MdOptions { member_faults: Some(pulls.faults()), workers, ..MdOptions::default() };
    let md = MdArray::assemble(&slots, &options).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes();
    let model = Mutex::new(fill(1, size as usize));
    rt.write_at(0, &model.lock().unwrap()).unwrap();

    let stop = AtomicBool::new(false);
    let region = size / CLIENTS / 512 * 512;
    std::thread::scope(|s| {
        for c in 0..CLIENTS {
            let (rt, model, stop) = (&rt, &model, &stop);
            s.spawn(move || client(rt, model, 10 + c, (c * region, region), stop));
        }
        // Set when the rounds end, or a panic unwinds them: the clients stop either way.
        let _stop = StopOnDrop(&stop);
        let mut rng = Rng(7);
        for round in 0..ROUNDS {
            let said = one_round(&md, &pulls, dir.path(), &mut slots, &mut rng, round);
            // Shown with a failure: which verb a client's wrong read came under.
            eprintln!("round {round}: {said}");
            let result = md.wait_sync_idle(WAIT);
            eprintln!("round {round}: {result:?}");
            // A member pulled during its replacement's copy left the array: its replacement
            // takes the slot (rebuilt where the copy had not got to) or, when the copy had
            // finished first, the member's remove is what is left to do.
            for f in md.status().members.iter().filter(|s| s.state == "faulty") {
                md.remove(&f.path).unwrap();
            }
            assert!(
                !md.status().degraded,
                "round {round} ({said}): {result:?}\n{:#?}",
                md.status()
            );
        }
    });

    let model = model.into_inner().unwrap();
    assert_same(&rt.read_at(0, size as usize).unwrap(), &model, "after the rounds");
    md.scrub(false).unwrap();
    let check = md.wait_sync_idle(WAIT).expect("a check");
    assert_eq!(check.mismatch_sectors, 0, "{check:?}");
    reads_with_two_failed(&md, 1, 4, &model, "two members failed after the rounds");
    drop(rt);
    md.stop().unwrap();
}

/// One round's verb on a member picked by `rng` (see the module docs); what it answered.
fn one_round(
    md: &MdArray,
    pulls: &Pulls,
    dir: &Path,
    slots: &mut [PathBuf],
    rng: &mut Rng,
    round: usize,
) -> String {
    let m = (rng.next() % 6) as usize;
    let path = slots[m].display().to_string();
    let new = new_device(dir, &format!("new{round}.img"));
    match round % 5 {
        0 => {
            md.fail(&path).unwrap();
            md.remove(&path).unwrap();
            std::thread::sleep(Duration::from_millis(rng.next() % 50));
            md.add(&path).unwrap()
        }
        1 => {
            pulls.pull(&path);
            // The engine fails it at its first I/O; `fail` if none comes soon.
            if !common::wait_for(|| faulty(md, &path)) {
                md.fail(&path).unwrap();
            }
            md.remove(&path).unwrap();
            slots[m].clone_from(&new);
            md.add(&new.display().to_string()).unwrap()
        }
        4 => {
            // A re-add whose recovery a second member's failure interrupts: both come back.
            md.fail(&path).unwrap();
            md.remove(&path).unwrap();
            let said = md.add(&path).unwrap();
            std::thread::sleep(Duration::from_millis(rng.next() % 100));
            let other = slots[(m + 1 + (rng.next() % 5) as usize) % 6].display().to_string();
            md.fail(&other).unwrap();
            md.remove(&other).unwrap();
            md.add(&other).unwrap();
            said
        }
        op => {
            let said = md.replace(&path, &new.display().to_string()).unwrap();
            if op == 3 {
                std::thread::sleep(Duration::from_millis(rng.next() % 100));
                pulls.pull(&path);
            }
            slots[m] = new;
            said
        }
    }
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn faulty(md: &MdArray, path: &str) -> bool {
    md.status().members.iter().any(|s| s.path == path && s.state == "faulty")
}

/// Random writes and reads of 4 KiB to 64 KiB inside `region` until `stop`, every read checked
/// against `model` (the region is this client's alone).
fn client(rt: &Runtime, model: &Mutex<Vec<u8>>, seed: u64, region: (u64, u64), stop: &AtomicBool) {
    let (base, len) = region;
    let mut rng = Rng(seed);
    let mut step = 0u64;
    while !stop.load(Ordering::Acquire) || step < 50 {
        let bytes = (1 + rng.next() % 16) * 4096;
        let at = base + rng.next() % ((len - bytes) / 4096 + 1) * 4096;
        let range = at as usize..(at + bytes) as usize;
        if rng.next().is_multiple_of(2) {
            let data = fill(seed * 100_000 + step, bytes as usize);
            rt.write_at(at, &data).unwrap();
            model.lock().unwrap()[range].copy_from_slice(&data);
        } else {
            let got = rt.read_at(at, bytes as usize).unwrap();
            let want = model.lock().unwrap()[range].to_vec();
            assert_same(&got, &want, &format!("client {seed}, step {step}: read {bytes} at {at}"));
        }
        step += 1;
    }
}
