//! `URAID_PARITY_WIDE_TUNING` turns the tuning of wide stripes on or off for a run; a value that
//! is neither stops the process with a message naming the variable, never a run that silently
//! measures something else. A test binary of its own: the variable is read once per process.

use std::panic::AssertUnwindSafe;
use uraid_parity::{Backend, WIDE_TUNING_ENV};

#[test]
fn an_unknown_wide_tuning_is_refused_by_name() {
    // SAFETY: the only test in this process, so nothing reads the environment meanwhile.
    unsafe { std::env::set_var(WIDE_TUNING_ENV, "maybe") };
    assert_ne!(uraid_parity::backend(), Backend::Scalar, "the SIMD backends ask for the tuning");
    // More than 8 data blocks, short enough for every backend's one-pass P+Q, which asks.
    let len = 1024;
    let src = vec![1u8; len];
    let data: Vec<Option<&[u8]>> = (0..16).map(|_| Some(src.as_slice())).collect();
    let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        uraid_parity::gen_syndrome(&mut p, &mut q, &data);
    }));
    let message = *r.expect_err("refused").downcast::<String>().expect("a formatted message");
    assert!(message.contains("URAID_PARITY_WIDE_TUNING=maybe"), "{message}");
    assert!(message.contains("not one of on, off"), "{message}");
}
