//! Helpers shared by the runtime's tests: array configurations, data patterns, and a model of
//! what the array should hold.

#![allow(dead_code)] // each test file uses its own subset

use std::sync::{Arc, Mutex};
use uraid_core::array::ArrayConfig;
use uraid_core::{Geometry, Level};
use uraid_runtime::{Runtime, RuntimeConfig};

pub const KIB: usize = 1024;

/// `disks` members of `member_bytes`, chunk `chunk_bytes`, 4 KiB stripe heads, 64 heads in all.
pub fn config(
    level: Level,
    disks: usize,
    chunk_bytes: usize,
    member_bytes: usize,
) -> RuntimeConfig {
    let geometry = Geometry::new(level, level.default_layout(), disks, chunk_bytes as u64).unwrap();
    let array = ArrayConfig {
        geometry,
        stripe_size_bytes: 4096,
        stripe_cache_size: 64,
        member_sectors: (member_bytes / 512) as u64,
    };
    RuntimeConfig {
        array,
        workers: None,
        data_offset_bytes: 0,
        write_intent: None,
        record_failures: false,
        write_back: true,
    }
}

pub fn with_workers(mut cfg: RuntimeConfig, workers: usize) -> RuntimeConfig {
    cfg.workers = Some(workers);
    cfg
}

/// xorshift bytes: different seeds give different data, the same seed the same.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| rng.next() as u8).collect()
}

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the array should hold: every byte the tests wrote (zeros elsewhere, as fresh members).
#[derive(Clone)]
pub struct Model(Arc<Mutex<Vec<u8>>>);

impl Model {
    pub fn new(size_bytes: u64) -> Model {
        Model(Arc::new(Mutex::new(vec![0; usize::try_from(size_bytes).unwrap()])))
    }

    pub fn write(&self, at: u64, data: &[u8]) {
        let at = at as usize;
        self.0.lock().unwrap()[at..at + data.len()].copy_from_slice(data);
    }

    pub fn zero(&self, at: u64, len: u64) {
        let (at, len) = (at as usize, len as usize);
        self.0.lock().unwrap()[at..at + len].fill(0);
    }

    pub fn read(&self, at: u64, len: usize) -> Vec<u8> {
        let at = at as usize;
        self.0.lock().unwrap()[at..at + len].to_vec()
    }
}

/// Asserts `got` equals `want`, naming the first differing byte instead of dumping both.
pub fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: byte {i} is {:#x}, expected {:#x}", got[i], want[i]);
    }
}

/// Random writes, discards and reads of 512 B to three rows inside `region` (offset, length),
/// every read checked against `model`; without `discards`, the discards are writes too.
pub fn client(
    rt: &Runtime,
    model: &Model,
    seed: u64,
    region: (u64, u64),
    row_bytes: u64,
    discards: bool,
) {
    let (base, len) = region;
    let mut rng = Rng::new(seed);
    for step in 0..150 {
        let max = (3 * row_bytes).min(len) / 512;
        let bytes = (1 + rng.below(max)) * 512;
        let at = base + rng.below((len - bytes) / 512 + 1) * 512;
        match rng.below(10) {
            4 if discards => {
                rt.discard(at, bytes).unwrap();
                model.zero(at, bytes);
            }
            0..=4 => {
                let data = pattern(seed * 1000 + step, bytes as usize);
                rt.write_at(at, &data).unwrap();
                model.write(at, &data);
            }
            _ => {
                let got = rt.read_at(at, bytes as usize).unwrap();
                assert_same(
                    &got,
                    &model.read(at, bytes as usize),
                    &format!("read {bytes} at {at}"),
                );
            }
        }
    }
}

/// Shared memory members, with member `member` of worker `worker` wrapped in `Faulty` and
/// failing every I/O after its first `after` ones.
pub struct FaultySource {
    pub inner: uraid_runtime::SharedMemorySource,
    pub worker: usize,
    pub member: usize,
    pub after: u64,
    pub opened: std::sync::atomic::AtomicUsize,
}

impl uraid_runtime::MemberSource for FaultySource {
    fn member_count(&self) -> usize {
        self.inner.media().len()
    }

    fn open(&self, member: usize) -> std::io::Result<Box<dyn uraid_io::Member>> {
        // `Runtime::start` opens worker 0's members in order, then worker 1's, ...
        let n = self.opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let worker = n / self.member_count();
        let media = &self.inner.media()[member];
        if (worker, member) != (self.worker, self.member) {
            return Ok(Box::new(media.member()));
        }
        let mut faulty = uraid_io::Faulty::new(media.member(), 7);
        faulty.fail_after_ios(self.after);
        Ok(Box::new(faulty))
    }
}
