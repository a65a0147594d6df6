//! The `dev_roles[]` table of a v1.x superblock and the array state mdadm derives from it.
//!
//! `dev_roles` is indexed by `dev_number` (a permanent identifier of a member, not its slot)
//! and says what each member is: an active slot number, or one of three special values. A
//! slot may appear twice while a replacement is being rebuilt; it appears once otherwise.
//! Unused entries are 0xffff (spare), which is also what mdadm fills the table with.

use std::fmt;

/// The raw value of a spare (or unused) entry.
pub const ROLE_SPARE: u16 = 0xffff;
/// The raw value of a faulty member.
pub const ROLE_FAULTY: u16 = 0xfffe;
/// The raw value of a journal member (raid5 write journal).
pub const ROLE_JOURNAL: u16 = 0xfffd;

/// One entry of `dev_roles[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DevRole {
    /// Holds the given slot of the array (0..raid_disks).
    #[doc(alias = "raid_disk")]
    Active(u16),
    /// A spare, or an unused entry.
    Spare,
    /// Failed; kept so the member is recognised and not reused.
    Faulty,
    /// A raid5 write journal.
    Journal,
}

impl DevRole {
    /// Decodes a raw entry. Total: every value that is not special is a slot number, and the
    /// superblock decoder rejects slot numbers that are out of range.
    #[must_use]
    pub fn from_raw(raw: u16) -> DevRole {
        match raw {
            ROLE_SPARE => DevRole::Spare,
            ROLE_FAULTY => DevRole::Faulty,
            ROLE_JOURNAL => DevRole::Journal,
            slot => DevRole::Active(slot),
        }
    }

    /// Encodes the entry; `from_raw(r.to_raw()) == r` for every role.
    #[must_use]
    pub fn to_raw(self) -> u16 {
        match self {
            DevRole::Active(slot) => {
                assert!(slot < ROLE_JOURNAL, "slot {slot:#x} collides with a special role");
                slot
            }
            DevRole::Spare => ROLE_SPARE,
            DevRole::Faulty => ROLE_FAULTY,
            DevRole::Journal => ROLE_JOURNAL,
        }
    }
}

/// What one slot looks like across `dev_roles[]`, as mdadm --examine prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// No member holds the slot (mdadm prints '.').
    Missing,
    /// Exactly one member holds the slot ('A').
    Active,
    /// Two members hold the slot: the original and its replacement ('R', levels above 0).
    Replacing,
    /// Any other count: the table is inconsistent ('?').
    Inconsistent,
}

/// Per-slot view of `dev_roles[]`: which slots are held and by how many members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayState {
    slots: Vec<SlotState>,
}

impl ArrayState {
    /// Counts, for each slot `0..slot_count`, the members whose role is that slot.
    /// `level` matters only because mdadm prints 'R' for two holders only when level > 0.
    #[must_use]
    pub fn from_roles(roles: &[DevRole], slot_count: u32, level: i32) -> ArrayState {
        let slots = (0..slot_count)
            .map(|slot| {
                let holders =
                    roles.iter().filter(|role| **role == DevRole::Active(slot as u16)).count();
                match holders {
                    0 => SlotState::Missing,
                    1 => SlotState::Active,
                    2 if level > 0 => SlotState::Replacing,
                    _ => SlotState::Inconsistent,
                }
            })
            .collect();
        ArrayState { slots }
    }

    /// The state of every slot, in slot order.
    #[must_use]
    pub fn slots(&self) -> &[SlotState] {
        &self.slots
    }

    /// How many slots are held by at least one member.
    #[must_use]
    pub fn active_count(&self) -> usize {
        self.slots.iter().filter(|slot| **slot != SlotState::Missing).count()
    }

    /// Whether some member holds `slot`.
    #[must_use]
    pub fn is_present(&self, slot: u32) -> bool {
        self.slots.get(slot as usize).is_some_and(|state| *state != SlotState::Missing)
    }
}

/// Formats as mdadm's "Array State" letters, e.g. `AAAA` or `AA.AAA`.
impl fmt::Display for ArrayState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for slot in &self.slots {
            let letter = match slot {
                SlotState::Missing => '.',
                SlotState::Active => 'A',
                SlotState::Replacing => 'R',
                SlotState::Inconsistent => '?',
            };
            write!(f, "{letter}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_roundtrip_covers_special_values() {
        for raw in [0u16, 1, 5, 0xff00, ROLE_JOURNAL, ROLE_FAULTY, ROLE_SPARE] {
            assert_eq!(DevRole::from_raw(raw).to_raw(), raw);
        }
    }

    #[test]
    fn array_state_letters() {
        // Goal: the three letters mdadm prints, from a table with a replacement in slot 0,
        // nobody in slot 2, and a faulty member that must not count.
        let roles = [0, 1, 0, ROLE_FAULTY, 3, ROLE_SPARE].map(DevRole::from_raw);
        let state = ArrayState::from_roles(&roles, 4, 5);
        assert_eq!(state.to_string(), "RA.A");
        assert_eq!(state.active_count(), 3);
        assert!(!state.is_present(2));
        assert!(state.is_present(3));
    }
}
