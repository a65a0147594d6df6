//! `URAID_PARITY_STORES` names the kind of stores for a run; a name that is none of them stops
//! the process with a message naming the variable, never a run that silently measures something
//! else. A test binary of its own: the variable is read once per process.

use std::panic::AssertUnwindSafe;
use uraid_parity::{Backend, STORES_ENV};

#[test]
fn an_unknown_store_kind_is_refused_by_name() {
    // SAFETY: the only test in this process, so nothing reads the environment meanwhile.
    unsafe { std::env::set_var(STORES_ENV, "fast") };
    assert_ne!(uraid_parity::backend(), Backend::Scalar, "the SIMD backends ask for the stores");
    // Blocks long enough, and an aligned output, for the kernel to ask which stores to use.
    let len = 64 << 10;
    let src = vec![1u8; len];
    let mut buf = vec![0u8; len + 64];
    let at = buf.as_ptr().align_offset(64);
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        uraid_parity::xor_gen(&mut buf[at..at + len], &[&src, &src]);
    }));
    let message = *r.expect_err("refused").downcast::<String>().expect("a formatted message");
    assert!(message.contains("URAID_PARITY_STORES=fast"), "{message}");
    assert!(message.contains("probe, ordinary, nontemporal"), "{message}");
}
