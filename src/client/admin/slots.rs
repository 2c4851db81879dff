//! A resource's slots as an operator looks at them (contract v1.8): each
//! slot is an ordinary fence row keyed `<resource>#<slot>`, so they are the
//! keys `ListLeases` finds under the prefix `<resource>#` that spell a slot
//! number (decimal digits, no leading zero), as `AcquireSlot` counts them.

use time::OffsetDateTime;

use super::Admin;
use super::leases::LeaseQuery;
use crate::client::slot::slot_number;
use crate::client::{Error, LeaseState};

/// Rows a page of `ListLeases` reads: a resource has at most
/// [`MAX_SLOTS`](crate::client::MAX_SLOTS) slots a call counts.
const PAGE: u32 = 1000;

/// Rows a page of the look for the resource's own key reads: it is the
/// first row but where keys continue it with control characters.
const ROW_PAGE: u32 = 16;

/// One slot of a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The slot's number.
    pub slot: u32,
    /// The slot's key, `<resource>#<slot>`.
    pub key: String,
    /// Its lease state, as `Inspect` shows it.
    pub state: LeaseState,
}

/// Every provisioned slot of a resource, in slot order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slots {
    /// Whether the resource's own key is provisioned: its row is the
    /// semaphore's lock, and without it `AcquireSlot` answers
    /// `NotProvisioned` whatever slots there are.
    pub resource_provisioned: bool,
    /// The slots, lowest number first. Read page by page, each page at its
    /// own moment.
    pub slots: Vec<Slot>,
    /// The server clock of the first row read; `None` when there was none.
    pub server_utc: Option<OffsetDateTime>,
}

impl Slots {
    /// How many slots are held now (server clock): what `AcquireSlot`
    /// counts against its slot count.
    pub fn held(&self) -> usize {
        self.slots.iter().filter(|slot| slot.state.is_held).count()
    }
}

impl Admin {
    /// Every provisioned slot of `resource` with its lease, and whether the
    /// resource's own key is provisioned, read page by page with
    /// `ListLeases` (so the login needs `fence_operator` or
    /// `fence_recovery`). A resource `AcquireSlot` would refuse (longer
    /// than 251 UTF-16 code units, a trailing space) is refused so, naming
    /// `@ResourceKey`. Keys under `<resource>#` that spell no slot number
    /// (`<resource>#01`, `<resource>#a`) are left out, as `AcquireSlot`
    /// leaves them out.
    pub async fn slots(&self, resource: &str) -> Result<Slots, Error> {
        crate::client::slot::slot_resource(resource)?;
        let (resource_provisioned, mut server_utc) = self.resource_row(resource).await?;
        let prefix = format!("{resource}#");
        let mut query = LeaseQuery::new();
        query.prefix(&prefix).max_rows(PAGE);
        let mut slots = Vec::new();
        loop {
            let page = self.list_leases(&query).await?;
            server_utc = server_utc.or(page.server_utc());
            slots.extend(page.leases.iter().filter_map(|listed| {
                Some(Slot {
                    slot: slot_number(resource, &listed.key)?,
                    key: listed.key.clone(),
                    state: listed.state,
                })
            }));
            match page.next_after() {
                Some(after) => {
                    query.after(after);
                }
                None => break,
            }
        }
        slots.sort_by_key(|slot| slot.slot);
        Ok(Slots {
            resource_provisioned,
            slots,
            server_utc,
        })
    }

    /// Whether `resource`'s own key has a fence row, and the server clock
    /// of the first row read, from `ListLeases` under the prefix `resource`:
    /// the key itself sorts before every key that continues it, except, on
    /// SQL Server (which pads the shorter key with spaces), one continuing
    /// it with spaces and then a character below U+0020, so the pages are
    /// read until the key, or a key that sorts after it on either engine,
    /// comes.
    async fn resource_row(&self, resource: &str) -> Result<(bool, Option<OffsetDateTime>), Error> {
        let mut query = LeaseQuery::new();
        query.prefix(resource).max_rows(ROW_PAGE);
        let mut server_utc = None;
        loop {
            let page = self.list_leases(&query).await?;
            server_utc = server_utc.or(page.server_utc());
            for listed in &page.leases {
                match sorts_after_its_prefix(resource, &listed.key) {
                    Some(false) => return Ok((true, server_utc)),
                    Some(true) => return Ok((false, server_utc)),
                    None => {}
                }
            }
            match page.next_after() {
                Some(after) => {
                    query.after(after);
                }
                None => return Ok((false, server_utc)),
            }
        }
    }
}

/// For a key `ListLeases` listed under the prefix `resource`: `Some(false)`
/// when it is `resource` itself, `Some(true)` when it sorts after
/// `resource` on every engine (what follows the prefix, spaces skipped as
/// SQL Server's padding compares them, starts at U+0020 or above), `None`
/// when it may sort before it (on SQL Server) or is no such key.
fn sorts_after_its_prefix(resource: &str, key: &str) -> Option<bool> {
    let rest = key.strip_prefix(resource)?;
    if rest.is_empty() {
        return Some(false);
    }
    match rest.trim_start_matches(' ').chars().next() {
        Some(next) if next > ' ' => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_key_that_sorts_after_the_resource_on_every_engine_ends_the_look() {
        assert_eq!(sorts_after_its_prefix("jobs", "jobs"), Some(false));
        assert_eq!(sorts_after_its_prefix("jobs", "jobs#0"), Some(true));
        assert_eq!(sorts_after_its_prefix("jobs", "jobs a"), Some(true));
        // Padded with spaces, these sort before "jobs" on SQL Server.
        assert_eq!(sorts_after_its_prefix("jobs", "jobs\u{1}"), None);
        assert_eq!(sorts_after_its_prefix("jobs", "jobs \u{1}"), None);
        assert_eq!(sorts_after_its_prefix("jobs", "jobs  \tx"), None);
        assert_eq!(sorts_after_its_prefix("jobs", "other"), None);
    }
}
