//! mdadm's spare groups: which hot spare `uraid monitor` moves where. Pure (statuses and the
//! configuration in, moves out); the CLI removes each spare from its array and adds it to the
//! other over their control sockets.
//!
//! mdadm's rule (its monitor's spare migration), kept: an array that is degraded and has no
//! spare (none waiting, none being rebuilt: md's active < raid_disks and spare_disks == 0)
//! takes one spare from another array of its spare group that is whole and has one. One spare
//! an array a look: a RAID6 missing two takes the second after the first is rebuilt, as in md.
//! Two rules of uraid's on top: an array failed past its redundancy takes none (no recovery
//! can run there; mdadm would move one all the same), and a read-only array neither takes nor
//! gives one (nothing may be written to its members, superblocks included).

use crate::mdadm_conf::MdadmConf;
use crate::status::ArrayStatus;

/// Spares that may go to one array, in the order to try them (the first that the array
/// takes is the move).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpareMove {
    /// The degraded array.
    pub to: String,
    pub candidates: Vec<Donation>,
}

/// One hot spare of a whole array of the same spare group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Donation {
    pub from: String,
    /// The spare, as its array names it (the path `remove` and `add` take).
    pub spare: String,
}

/// The moves this look calls for, by array name. A spare is listed for every array that may
/// take it; the caller moves each at most once.
#[must_use]
pub fn spare_moves(statuses: &[ArrayStatus], conf: &MdadmConf) -> Vec<SpareMove> {
    let mut sorted: Vec<&ArrayStatus> = statuses.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut moves = Vec::new();
    for to in sorted.iter().filter(|s| wants_spare(s)) {
        let Some(group) = conf.spare_group(to) else { continue };
        let candidates: Vec<Donation> = sorted
            .iter()
            .filter(|from| from.name != to.name && conf.spare_group(from) == Some(group))
            .filter(|from| can_give(from))
            .flat_map(|from| {
                let spares = from.members.iter().filter(|m| m.slot.is_none() && m.state == "spare");
                spares.map(|m| Donation { from: from.name.clone(), spare: m.path.clone() })
            })
            .collect();
        if !candidates.is_empty() {
            moves.push(SpareMove { to: to.name.clone(), candidates });
        }
    }
    moves
}

/// Degraded, with no spare of its own, and able to rebuild onto one.
fn wants_spare(s: &ArrayStatus) -> bool {
    s.in_sync_members() < s.raid_disks && s.spare_members() == 0 && !s.failed() && !s.read_only
}

/// Whole (md gives nothing from a degraded array: it may need its spares) and writable.
fn can_give(s: &ArrayStatus) -> bool {
    s.in_sync_members() == s.raid_disks && !s.read_only
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mdadm_conf::parse;
    use crate::status::MemberStatus;

    fn member(slot: Option<u32>, path: &str, state: &str) -> MemberStatus {
        MemberStatus { slot, path: path.into(), state: state.into(), ..MemberStatus::default() }
    }

    /// A RAID5 of three: `down` slots missing, then the spares given.
    fn raid5(name: &str, down: u32, spares: &[(&str, &str)]) -> ArrayStatus {
        let mut members: Vec<MemberStatus> = (0..3)
            .map(|slot| {
                let path =
                    if slot < down { "missing".to_owned() } else { format!("{name}-m{slot}") };
                let state = if slot < down { "removed" } else { "active sync" };
                member(Some(slot), &path, state)
            })
            .collect();
        members.extend(spares.iter().map(|(path, state)| member(None, path, state)));
        let degraded = down > 0;
        ArrayStatus {
            name: name.into(),
            level: 5,
            raid_disks: 3,
            members,
            degraded,
            ..ArrayStatus::default()
        }
    }

    fn conf() -> MdadmConf {
        parse(
            "ARRAY /dev/md/a spare-group=g\nARRAY /dev/md/b spare-group=g\n\
               ARRAY /dev/md/c spare-group=g\nARRAY /dev/md/x spare-group=other\n",
        )
        .unwrap()
    }

    fn moves(statuses: &[ArrayStatus]) -> Vec<(String, Vec<String>)> {
        spare_moves(statuses, &conf())
            .into_iter()
            .map(|m| {
                (
                    m.to,
                    m.candidates.into_iter().map(|d| format!("{}:{}", d.from, d.spare)).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn a_degraded_array_without_a_spare_is_offered_its_groups_spares() {
        let statuses = [
            raid5("a", 1, &[]),
            raid5("b", 0, &[("s1", "spare"), ("s2", "spare")]),
            raid5("c", 0, &[("s3", "spare")]),
            raid5("x", 0, &[("s4", "spare")]),
            raid5("y", 0, &[("s5", "spare")]),
        ];
        let expected = vec![("a".to_owned(), vec!["b:s1".into(), "b:s2".into(), "c:s3".into()])];
        assert_eq!(moves(&statuses), expected);
    }

    #[test]
    fn no_move_where_md_makes_none() {
        let donor = raid5("b", 0, &[("s1", "spare")]);
        let cases = [
            // Whole; a spare of its own waiting; one being rebuilt; failed past redundancy.
            raid5("a", 0, &[]),
            raid5("a", 1, &[("own", "spare")]),
            raid5("a", 1, &[]).with_rebuilding(),
            raid5("a", 2, &[]),
            // In no group, or read-only.
            raid5("y", 1, &[]),
            ArrayStatus { read_only: true, ..raid5("a", 1, &[]) },
        ];
        for to in cases {
            assert_eq!(moves(&[to.clone(), donor.clone()]), vec![], "{:?}", to.members);
        }
        // Donors that give nothing: degraded themselves, read-only, or their spare rebuilding.
        let donors = [
            raid5("b", 1, &[("s1", "spare")]),
            ArrayStatus { read_only: true, ..donor.clone() },
            raid5("b", 0, &[("s1", "faulty")]),
        ];
        for from in donors {
            assert_eq!(moves(&[raid5("a", 1, &[]), from.clone()]), vec![], "{:?}", from.members);
        }
    }

    #[test]
    fn every_degraded_array_of_the_group_is_offered_the_same_spares() {
        let statuses = [raid5("c", 1, &[]), raid5("a", 1, &[]), raid5("b", 0, &[("s1", "spare")])];
        let expected =
            vec![("a".to_owned(), vec!["b:s1".into()]), ("c".to_owned(), vec!["b:s1".into()])];
        assert_eq!(moves(&statuses), expected);
    }

    impl ArrayStatus {
        /// The first missing slot being rebuilt onto a spare.
        fn with_rebuilding(mut self) -> ArrayStatus {
            let slot = self.members.iter_mut().find(|m| m.path == "missing").unwrap();
            *slot = member(slot.slot, "new", "spare rebuilding");
            self
        }
    }
}
