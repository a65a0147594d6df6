//! RAID levels and md's layout algorithms (the `ALGORITHM_*` numbers stored in the superblock's
//! `layout` field), with the names mdadm prints and accepts.
//!
//! Where P and Q go for each layout is decided in `geometry.rs`; this file only names things and
//! says which level accepts which layout.

use crate::error::GeometryError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Striping without parity: the baseline that benchmarks compare against.
    Raid0,
    /// Dedicated parity on the last member.
    Raid4,
    Raid5,
    Raid6,
}

impl Level {
    #[must_use]
    pub fn number(self) -> u8 {
        match self {
            Level::Raid0 => 0,
            Level::Raid4 => 4,
            Level::Raid5 => 5,
            Level::Raid6 => 6,
        }
    }

    /// How many members the array survives losing (md's `max_degraded`).
    #[must_use]
    pub fn max_degraded(self) -> u16 {
        match self {
            Level::Raid0 => 0,
            Level::Raid4 | Level::Raid5 => 1,
            Level::Raid6 => 2,
        }
    }

    /// Smallest member count md accepts for the level.
    #[must_use]
    pub fn raid_disks_min(self) -> u16 {
        match self {
            Level::Raid0 => 1,
            Level::Raid4 | Level::Raid5 => 2,
            Level::Raid6 => 4,
        }
    }

    /// The layout md uses when none is given (mdadm's default).
    #[must_use]
    pub fn default_layout(self) -> Layout {
        match self {
            Level::Raid0 => Layout::Striped,
            // md ignores the layout field for RAID4: parity is always on the last member.
            Level::Raid4 => Layout::ParityLast,
            Level::Raid5 | Level::Raid6 => Layout::LeftSymmetric,
        }
    }

    pub fn parse(text: &str) -> Result<Level, GeometryError> {
        let t = text.trim().to_ascii_lowercase();
        let t = t.strip_prefix("raid").unwrap_or(&t);
        match t {
            "0" => Ok(Level::Raid0),
            "4" => Ok(Level::Raid4),
            "5" => Ok(Level::Raid5),
            "6" => Ok(Level::Raid6),
            _ => Err(GeometryError::UnknownLevel(text.to_string())),
        }
    }
}

/// md's layout algorithms. The discriminant is the number md stores in the superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Layout {
    #[doc(alias = "ALGORITHM_LEFT_ASYMMETRIC")]
    LeftAsymmetric = 0,
    #[doc(alias = "ALGORITHM_RIGHT_ASYMMETRIC")]
    RightAsymmetric = 1,
    #[doc(alias = "ALGORITHM_LEFT_SYMMETRIC")]
    LeftSymmetric = 2,
    #[doc(alias = "ALGORITHM_RIGHT_SYMMETRIC")]
    RightSymmetric = 3,
    #[doc(alias = "ALGORITHM_PARITY_0")]
    ParityFirst = 4,
    #[doc(alias = "ALGORITHM_PARITY_N")]
    ParityLast = 5,
    #[doc(alias = "ALGORITHM_ROTATING_ZERO_RESTART")]
    DdfZeroRestart = 8,
    #[doc(alias = "ALGORITHM_ROTATING_N_RESTART")]
    DdfNRestart = 9,
    #[doc(alias = "ALGORITHM_ROTATING_N_CONTINUE")]
    DdfNContinue = 10,
    #[doc(alias = "ALGORITHM_LEFT_ASYMMETRIC_6")]
    LeftAsymmetric6 = 16,
    #[doc(alias = "ALGORITHM_RIGHT_ASYMMETRIC_6")]
    RightAsymmetric6 = 17,
    #[doc(alias = "ALGORITHM_LEFT_SYMMETRIC_6")]
    LeftSymmetric6 = 18,
    #[doc(alias = "ALGORITHM_RIGHT_SYMMETRIC_6")]
    RightSymmetric6 = 19,
    #[doc(alias = "ALGORITHM_PARITY_0_6")]
    ParityFirst6 = 20,
    /// RAID0's plain striping (not an md raid456 algorithm; stored as 0).
    Striped = 0xffff_0000,
}

/// Every layout with its mdadm name, in md's numbering order.
pub const LAYOUTS: [(Layout, &str); 15] = [
    (Layout::LeftAsymmetric, "left-asymmetric"),
    (Layout::RightAsymmetric, "right-asymmetric"),
    (Layout::LeftSymmetric, "left-symmetric"),
    (Layout::RightSymmetric, "right-symmetric"),
    (Layout::ParityFirst, "parity-first"),
    (Layout::ParityLast, "parity-last"),
    (Layout::DdfZeroRestart, "ddf-zero-restart"),
    (Layout::DdfNRestart, "ddf-N-restart"),
    (Layout::DdfNContinue, "ddf-N-continue"),
    (Layout::LeftAsymmetric6, "left-asymmetric-6"),
    (Layout::RightAsymmetric6, "right-asymmetric-6"),
    (Layout::LeftSymmetric6, "left-symmetric-6"),
    (Layout::RightSymmetric6, "right-symmetric-6"),
    (Layout::ParityFirst6, "parity-first-6"),
    (Layout::Striped, "striped"),
];

impl Layout {
    /// The name mdadm prints (`mdadm --examine`'s "Layout :" line).
    #[must_use]
    pub fn name(self) -> &'static str {
        LAYOUTS.iter().find(|(l, _)| *l == self).map(|(_, n)| *n).expect("every layout is named")
    }

    /// The number md stores in the superblock's `layout` field.
    #[must_use]
    pub fn md_number(self) -> u32 {
        match self {
            Layout::Striped => 0,
            other => other as u32,
        }
    }

    /// Parses mdadm's names (and its short forms `la`, `ra`, `ls`, `rs`), case-insensitively.
    pub fn parse(text: &str) -> Result<Layout, GeometryError> {
        let t = text.trim().to_ascii_lowercase();
        let t = match t.as_str() {
            "la" => "left-asymmetric",
            "ra" => "right-asymmetric",
            "ls" | "default" => "left-symmetric",
            "rs" => "right-symmetric",
            other => other,
        };
        LAYOUTS
            .iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(t))
            .map(|(l, _)| *l)
            .ok_or_else(|| GeometryError::UnknownLayout(text.to_string()))
    }

    /// The layout for an md superblock's (level, layout) pair. md ignores the field for RAID4.
    pub fn from_md(level: Level, number: u32) -> Result<Layout, GeometryError> {
        let layout = match level {
            Level::Raid0 => Layout::Striped,
            Level::Raid4 => Layout::ParityLast,
            Level::Raid5 | Level::Raid6 => LAYOUTS
                .iter()
                .map(|(l, _)| *l)
                .find(|l| *l != Layout::Striped && l.md_number() == number)
                .ok_or_else(|| GeometryError::UnknownLayout(format!("md layout {number}")))?,
        };
        layout.check_level(level)?;
        Ok(layout)
    }

    /// DDF layouts number Q's coefficients by physical position, md's by data position.
    #[must_use]
    pub fn is_ddf(self) -> bool {
        matches!(self, Layout::DdfZeroRestart | Layout::DdfNRestart | Layout::DdfNContinue)
    }

    /// The `-6` layouts: RAID5's rotation of P over the first n-1 members, Q on the last.
    #[must_use]
    pub fn is_q_last(self) -> bool {
        matches!(
            self,
            Layout::LeftAsymmetric6
                | Layout::RightAsymmetric6
                | Layout::LeftSymmetric6
                | Layout::RightSymmetric6
                | Layout::ParityFirst6
        )
    }

    /// Refuses a layout that md refuses for the level (md's `algorithm_valid_raid5/6`).
    pub fn check_level(self, level: Level) -> Result<(), GeometryError> {
        let refuse = |rule| {
            Err(GeometryError::LayoutNotForLevel {
                level: level.number(),
                layout: self.name(),
                rule,
            })
        };
        match level {
            Level::Raid0 if self != Layout::Striped => refuse("RAID0 has no parity to place"),
            Level::Raid4 if self != Layout::ParityLast => {
                refuse("RAID4 keeps parity on the last member (md ignores the layout field)")
            }
            Level::Raid5 if (self as u32) > 5 => {
                refuse("RAID5 takes left/right-(a)symmetric, parity-first or parity-last")
            }
            Level::Raid6 if self == Layout::Striped => refuse("RAID6 needs a P and Q layout"),
            _ => Ok(()),
        }
    }
}
