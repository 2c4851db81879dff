//! `AcquireSlot` (contract 1.8): a fenced semaphore. Each slot is an
//! ordinary fence row keyed `<resource>#<slot>`; the resource's own row is
//! the semaphore's lock, and every slot row there is counts, whatever its
//! number.

use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::answer::Ending;
use super::check;
use super::refusal::{self, Refusal};
use super::set_answer::SlotAcquired;
use super::state::Fence;

/// The longest resource key with slots, in UTF-16 code units: its slot keys
/// add `#` and up to four digits.
pub const MAX_SLOT_RESOURCE_UNITS: usize = 251;
/// The most slots a resource may have.
pub const MAX_SLOTS: i32 = 1000;

/// The slot number `key` spells as a slot of `resource`: `<resource>#`
/// and 1 to 4 decimal digits with no leading zero (`#0` is slot 0, `#01`
/// no slot at all).
pub fn slot_number(resource: &str, key: &str) -> Option<i32> {
    let digits = key.strip_prefix(resource)?.strip_prefix('#')?;
    let shaped = (1..=4).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits.len() == 1 || !digits.starts_with('0'));
    shaped.then(|| digits.parse().ok()).flatten()
}

impl Fence {
    /// `AcquireSlot`: the owner's own live slot (the lowest, whatever its
    /// number) is extended at its generation; otherwise, while fewer slot
    /// rows are live than `@Slots`, the lowest free or expired slot below
    /// `@Slots` is taken at its next generation (an expired holder's tenure
    /// ends `Expired`); as many live as `@Slots` is `Busy` until the earliest
    /// of their ends. No resource row, or no free provisioned slot below the
    /// count, is `NotProvisioned`.
    pub(super) fn acquire_slot(
        &mut self,
        resource: &Option<String>,
        slots: Option<i32>,
        owner: Option<Uuid>,
        lease_seconds: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<SlotAcquired, Refusal> {
        let resource = match resource {
            Some(key) if (1..=MAX_SLOT_RESOURCE_UNITS).contains(&key.encode_utf16().count()) => key,
            _ => return Err(refusal::SLOT_KEY_LENGTH),
        };
        if resource.ends_with(' ') {
            return Err(refusal::KEY_TRAILING_SPACE);
        }
        let count = slots.filter(|n| (1..=MAX_SLOTS).contains(n)).ok_or(refusal::SLOTS)?;
        let owner = check::owner(owner)?;
        let seconds = check::lease_seconds(lease_seconds)?;
        let until = now + Duration::seconds(seconds.into());
        if !self.resources.contains_key(resource) {
            return Ok(SlotAcquired::NotProvisioned { server_utc: now });
        }
        let mut slot_rows: Vec<(i32, &String)> = self
            .resources
            .keys()
            .filter_map(|key| slot_number(resource, key).map(|n| (n, key)))
            .collect();
        slot_rows.sort();
        let row = |key: &String| &self.resources[key];
        let own = slot_rows
            .iter()
            .find(|(_, key)| row(key).owner == Some(owner) && row(key).is_held(now));
        let live: Vec<OffsetDateTime> = slot_rows
            .iter()
            .filter(|(_, key)| row(key).is_held(now))
            .filter_map(|(_, key)| row(key).lease_until)
            .collect();
        let free = slot_rows.iter().find(|(n, key)| *n < count && !row(key).is_held(now));
        let (slot, key) = match (own, free) {
            (Some(&(slot, key)), _) => {
                // The holder's retry: its slot, its generation kept.
                let key = key.clone();
                self.resources.get_mut(&key).expect("a slot row").lease_until = Some(until);
                (slot, key)
            }
            _ if live.len() >= count as usize => {
                return Ok(SlotAcquired::Busy {
                    lease_until: live.into_iter().min().expect("at least one slot is live"),
                    server_utc: now,
                });
            }
            (None, None) => return Ok(SlotAcquired::NotProvisioned { server_utc: now }),
            (None, Some(&(slot, key))) => {
                let key = key.clone();
                let row = self.resources.get_mut(&key).expect("a slot row");
                let ended = row
                    .owner
                    .map(|holder| row.end_tenure(&key, holder, now, Ending::Expired));
                row.generation += 1;
                row.owner = Some(owner);
                row.lease_until = Some(until);
                row.acquired_at = Some(now);
                if let Some(tenure) = ended {
                    self.tenures.insert((key.clone(), tenure.generation), tenure);
                }
                (slot, key)
            }
        };
        Ok(SlotAcquired::Acquired {
            slot,
            generation: self.resources[&key].generation,
            resource_key: key,
            lease_until: until,
            server_utc: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::slot_number;
    use crate::model::run::Run;
    use crate::model::{Answer, Call, Session, SlotAcquired};

    fn slot(run: &mut Run, slots: i32, owner: Uuid) -> SlotAcquired {
        match run.ok(&Call::acquire_slot("r", slots, owner, 30)) {
            Answer::AcquireSlot(acquired) => acquired,
            other => panic!("{other:?}"),
        }
    }

    fn taken(acquired: &SlotAcquired) -> (i32, i64) {
        match acquired {
            SlotAcquired::Acquired { slot, generation, .. } => (*slot, *generation),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_slot_key_spells_its_number_without_a_leading_zero() {
        assert_eq!(slot_number("r", "r#0"), Some(0));
        assert_eq!(slot_number("r", "r#999"), Some(999));
        assert_eq!(slot_number("r", "r#01"), None);
        assert_eq!(slot_number("r", "r#"), None);
        assert_eq!(slot_number("r", "r#12345"), None);
        assert_eq!(slot_number("r", "r#1a"), None);
        assert_eq!(slot_number("r", "rr#1"), None);
    }

    #[test]
    fn slots_are_taken_lowest_first_until_the_count_is_live() {
        let mut run = Run::with(&["r", "r#0", "r#1", "r#01"]);
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(taken(&slot(&mut run, 2, a)), (0, 1));
        assert_eq!(taken(&slot(&mut run, 2, b)), (1, 1));
        assert_eq!(
            slot(&mut run, 2, c),
            SlotAcquired::Busy {
                lease_until: run.at(30),
                server_utc: run.now
            }
        );
        // The owner's retry extends its own slot.
        run.later(5);
        assert_eq!(taken(&slot(&mut run, 2, b)), (1, 1));
        assert_eq!(run.fence.resource("r#1").unwrap().lease_until, Some(run.at(35)));
        // Run out: the slot is taken again under a new generation.
        run.later(26);
        assert_eq!(taken(&slot(&mut run, 2, c)), (0, 2));
    }

    #[test]
    fn a_lowered_count_counts_the_holders_of_higher_slots_until_they_end() {
        let mut run = Run::with(&["r", "r#0", "r#1"]);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        slot(&mut run, 2, a);
        slot(&mut run, 2, b);
        run.ok(&Call::release("r#0", a, 1));
        assert!(matches!(slot(&mut run, 1, Uuid::new_v4()), SlotAcquired::Busy { .. }));
        // The holder of slot 1, above the new count, is still answered its slot.
        assert_eq!(taken(&slot(&mut run, 1, b)), (1, 1));
    }

    #[test]
    fn no_free_provisioned_slot_below_the_count_is_not_provisioned() {
        let mut run = Run::with(&["r", "r#0"]);
        slot(&mut run, 3, Uuid::new_v4());
        assert!(matches!(
            slot(&mut run, 3, Uuid::new_v4()),
            SlotAcquired::NotProvisioned { .. }
        ));
        let mut bare = Run::with(&[]);
        assert!(matches!(
            slot(&mut bare, 3, Uuid::new_v4()),
            SlotAcquired::NotProvisioned { .. }
        ));
    }

    #[test]
    fn bad_input_is_refused_in_the_procedures_order() {
        let mut run = Run::with(&["r"]);
        let call = |key: Option<&str>, slots: Option<i32>, owner: Option<Uuid>| Call::AcquireSlot {
            resource_key: key.map(str::to_string),
            slots,
            owner,
            lease_seconds: Some(0),
        };
        let auto = Session::Autocommit;
        let long = "k".repeat(252);
        assert_eq!(run.refused(&call(Some(&long), None, None), auto), 50101);
        assert_eq!(run.refused(&call(Some("r "), None, None), auto), 50101);
        assert_eq!(run.refused(&call(Some("r"), Some(1001), None), auto), 50136);
        assert_eq!(run.refused(&call(Some("r"), Some(1), None), auto), 50102);
        assert_eq!(
            run.refused(&call(Some("r"), Some(1), Some(Uuid::new_v4())), auto),
            50103
        );
    }
}
