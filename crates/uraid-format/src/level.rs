//! md RAID levels as stored in the superblock's signed `level` field.

use std::fmt;

/// The levels this crate decodes. md also has multipath (-4) and faulty (-5), which were
/// removed from the kernel (6.8) and are refused here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    Linear,
    Raid0,
    Raid1,
    Raid4,
    Raid5,
    Raid6,
    Raid10,
}

impl Level {
    /// Maps md's number; `None` for levels this crate does not know.
    #[must_use]
    pub fn from_md(level: i32) -> Option<Level> {
        match level {
            -1 => Some(Level::Linear),
            0 => Some(Level::Raid0),
            1 => Some(Level::Raid1),
            4 => Some(Level::Raid4),
            5 => Some(Level::Raid5),
            6 => Some(Level::Raid6),
            10 => Some(Level::Raid10),
            _ => None,
        }
    }

    /// md's number for the level; `from_md(l.to_md()) == Some(l)`.
    #[must_use]
    pub fn to_md(self) -> i32 {
        match self {
            Level::Linear => -1,
            Level::Raid0 => 0,
            Level::Raid1 => 1,
            Level::Raid4 => 4,
            Level::Raid5 => 5,
            Level::Raid6 => 6,
            Level::Raid10 => 10,
        }
    }

    /// md's `max_degraded`: the parity members of RAID4, 5 (one) and 6 (two).
    #[must_use]
    pub fn max_degraded(self) -> u32 {
        if self == Level::Raid6 { 2 } else { 1 }
    }

    /// Whether the level stripes data in chunks (and so needs a chunk size).
    #[must_use]
    pub fn is_striped(self) -> bool {
        !matches!(self, Level::Linear | Level::Raid1)
    }

    /// Whether `layout` is a layout md accepts for this level. Only raid5 and raid6 are
    /// checked: raid4 ignores the field (the r4 fixture stores 0, parity is always last), and
    /// raid0/raid10 encode other things in it that this crate does not interpret.
    #[must_use]
    pub fn accepts_layout(self, layout: u32) -> bool {
        match self {
            // left/right asymmetric/symmetric 0..=3, parity-first 4, parity-last 5.
            Level::Raid5 => layout <= 5,
            // The raid5 layouts, the rotating-restart family 8..=10 and the "-6" layouts
            // 16..=20 (RAID5 rotation over n-1 devices, Q on the last device).
            Level::Raid6 => {
                layout <= 5 || (8..=10).contains(&layout) || (16..=20).contains(&layout)
            }
            _ => true,
        }
    }
}

/// Formats as mdadm prints the level ("raid5", "linear").
impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Linear => write!(f, "linear"),
            other => write!(f, "raid{}", other.to_md()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md_numbers_roundtrip() {
        for number in -6..=12 {
            if let Some(level) = Level::from_md(number) {
                assert_eq!(level.to_md(), number);
            }
        }
        assert_eq!(Level::from_md(-4), None);
        assert_eq!(Level::Raid6.to_string(), "raid6");
    }
}
