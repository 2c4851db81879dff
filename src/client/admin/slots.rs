//! A resource's slots as an operator looks at them (contract v1.8): each
//! slot is an ordinary fence row keyed `<resource>#<slot>`, so they are the
//! keys `ListLeases` finds under the prefix `<resource>#` that spell a slot
//! number (decimal digits, no leading zero), as `AcquireSlot` counts them.

use time::OffsetDateTime;

use super::Admin;
use super::leases::{Inspected, LeaseQuery};
use crate::client::slot::slot_number;
use crate::client::{Error, Inspection, LeaseState};

/// Rows a page of `ListLeases` reads: a resource has at most
/// [`MAX_SLOTS`](crate::client::MAX_SLOTS) slots a call counts.
const PAGE: u32 = 1000;

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
    /// The server clock when the resource's own key was read, before the
    /// slots.
    pub server_utc: OffsetDateTime,
}

impl Slots {
    /// How many slots are held now (server clock): what `AcquireSlot`
    /// counts against its slot count.
    pub fn held(&self) -> usize {
        self.slots.iter().filter(|slot| slot.state.is_held).count()
    }
}

impl Admin {
    /// Every provisioned slot of `resource` with its lease, read page by
    /// page with `ListLeases` (so the login needs `fence_operator` or
    /// `fence_recovery`), after the resource's own key with `Inspect`. A
    /// resource `AcquireSlot` would refuse (longer than 251 UTF-16 code
    /// units, a trailing space) is refused so, naming `@ResourceKey`. Keys under `<resource>#` that
    /// spell no slot number (`<resource>#01`, `<resource>#a`) are left out,
    /// as `AcquireSlot` leaves them out.
    pub async fn slots(&self, resource: &str) -> Result<Slots, Error> {
        crate::client::slot::slot_resource(resource)?;
        let Inspected { inspection, server_utc } = self.inspect(resource).await?;
        let prefix = format!("{resource}#");
        let mut query = LeaseQuery::new();
        query.prefix(&prefix).max_rows(PAGE);
        let mut slots = Vec::new();
        loop {
            let page = self.list_leases(&query).await?;
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
            resource_provisioned: inspection != Inspection::NotProvisioned,
            slots,
            server_utc,
        })
    }
}
