//! Median-of-N timing with the contenders interleaved, so that a noisy neighbour slows both alike.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// How long each sample runs and how many samples each contender gets.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub sample: Duration,
    pub samples: usize,
}

impl Timing {
    #[must_use]
    pub fn new(quick: bool) -> Timing {
        if quick {
            Timing { sample: Duration::from_millis(2), samples: 2 }
        } else {
            // Many short samples, alternating contenders: a neighbour on this shared machine
            // then disturbs all contenders alike, and the median ignores the worst batches.
            Timing { sample: Duration::from_millis(8), samples: 25 }
        }
    }

    /// Median seconds per iteration of `run(contender, iteration)` for contenders `0..K`, over
    /// `samples` batches per contender, alternating batches between them.
    pub fn compare<const K: usize>(&self, mut run: impl FnMut(usize, usize)) -> [f64; K] {
        let iters = self.calibrate(&mut run);
        let mut times: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(self.samples));
        let mut i = 0;
        for _ in 0..self.samples {
            for (who, times) in times.iter_mut().enumerate() {
                let start = Instant::now();
                for _ in 0..iters {
                    run(black_box(who), i);
                    i += 1;
                }
                times.push(start.elapsed().as_secs_f64() / iters as f64);
            }
        }
        times.map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
    }

    /// Keeps the core busy for `d` first, so that the first rows do not run at a lower clock.
    pub fn warm_up(d: Duration, mut work: impl FnMut()) {
        let start = Instant::now();
        while start.elapsed() < d {
            work();
        }
    }

    /// Iterations that fill one sample, from timing the first contender.
    fn calibrate(&self, run: &mut impl FnMut(usize, usize)) -> usize {
        let mut iters = 1usize;
        loop {
            let start = Instant::now();
            for i in 0..iters {
                run(0, i);
            }
            let took = start.elapsed();
            if took >= self.sample / 4 || iters >= 1 << 30 {
                let per = took.as_secs_f64() / iters as f64;
                let iters = (self.sample.as_secs_f64() / per.max(1e-9)).ceil();
                #[allow(clippy::cast_sign_loss)] // a positive ratio of durations
                return (iters as usize).max(1);
            }
            iters *= 4;
        }
    }
}
