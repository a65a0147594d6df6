//! `URAID_PARITY_ZEN5_TUNING` turns the figures measured on Zen 5 on or off for a run; a value
//! that is neither stops the process with a message naming the variable, never a run that
//! silently measures something else. A test binary of its own: the variable is read once per
//! process.

use std::panic::AssertUnwindSafe;
use uraid_parity::{Backend, ZEN5_TUNING_ENV};

#[test]
fn an_unknown_zen5_tuning_is_refused_by_name() {
    // SAFETY: the only test in this process, so nothing reads the environment meanwhile.
    unsafe { std::env::set_var(ZEN5_TUNING_ENV, "maybe") };
    assert_ne!(uraid_parity::backend(), Backend::Scalar, "the SIMD backends ask for the tuning");
    // XOR of four sources past L1 with ordinary stores asks (`xor_by_source`).
    let len = 64 << 10;
    let src = vec![1u8; len];
    let srcs: Vec<&[u8]> = (0..4).map(|_| src.as_slice()).collect();
    let mut p = vec![0u8; len];
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        uraid_parity::xor_gen_cached(&mut p, &srcs);
    }));
    let message = *r.expect_err("refused").downcast::<String>().expect("a formatted message");
    assert!(message.contains("URAID_PARITY_ZEN5_TUNING=maybe"), "{message}");
    assert!(message.contains("not one of on, off"), "{message}");
}
