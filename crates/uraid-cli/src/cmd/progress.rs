//! Progress of long foreground copies (`assemble -o`, `build`): a bar with rate and ETA on
//! standard error when it is a terminal, nothing at all otherwise (pipes and logs stay clean).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub fn byte_bar(total_bytes: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(total_bytes);
    let style = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
    )
    .expect("the template is valid")
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}
