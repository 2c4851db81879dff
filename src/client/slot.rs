//! Slots (contract v1.8): a fenced semaphore. A resource with N slots has at
//! most N holders at once; each slot is an ordinary fence row keyed
//! `<resource>#<slot>` with its own generation, renewed, published under and
//! released as any lease is.

use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;
use uuid::Uuid;

use super::contract::Procedure;
use super::error::Error;
use super::parameter::Parameter;
use super::span::About;
use super::wait::{Retries, later, retry_acquire};
use super::{Client, Lease, Provision, input, outcome};

/// The most slots a resource may have: what `AcquireSlot` takes.
pub const MAX_SLOTS: u32 = 1000;

/// The pause before the first retry of an `AcquireSlot` whose reply was
/// lost, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What `AcquireSlot` answered.
#[must_use = "an acquired slot is held until it expires unless it is released"]
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum AcquireSlot {
    /// A slot is yours: its number, and its lease (on the slot's own key).
    Acquired {
        /// The slot's number, 0 to `slots - 1`.
        slot: u32,
        /// The lease on the slot's key, [`slot_key`]`(resource, slot)`.
        lease: Lease,
    },
    /// As many holders as slots hold the resource (counting the holders of
    /// higher slots a larger slot count let in, until their leases end).
    Busy {
        /// The earliest expiry among the holders, on the server clock.
        until: OffsetDateTime,
        /// How long that holder's lease had left, on the server clock alone.
        remaining: Duration,
    },
    /// The resource's own key, or the key of every free slot below the slot
    /// count, is not provisioned: [`provision_slots`](Client::provision_slots).
    NotProvisioned,
}

/// The key of slot `slot` of `resource`: `<resource>#<slot>`.
pub fn slot_key(resource: &str, slot: u32) -> String {
    format!("{resource}#{slot}")
}

/// `resource` as `AcquireSlot` takes it: a key with room left for `#` and a
/// slot number, at most [`MAX_SLOT_RESOURCE_UTF16_UNITS`] UTF-16 code units.
pub(crate) fn slot_resource(resource: &str) -> Result<&str, Error> {
    let key = input::key(resource)?;
    let units = key.encode_utf16().count();
    if units > MAX_SLOT_RESOURCE_UTF16_UNITS {
        return Err(Error::invalid(
            Parameter::ResourceKey,
            format!(
                "must be at most {MAX_SLOT_RESOURCE_UTF16_UNITS} UTF-16 code units for a resource with slots (room for '#' and a slot number), not {units}"
            ),
        ));
    }
    Ok(key)
}

/// The longest resource key `AcquireSlot` takes: a key's 256 UTF-16 code
/// units less `#` and four digits.
pub const MAX_SLOT_RESOURCE_UTF16_UNITS: usize = 251;

/// The slot number `key` spells as a slot of `resource`: `<resource>#` and
/// one to four decimal digits with no leading zero (`#0` is slot 0, `#01`
/// no slot), the rows `AcquireSlot` counts; `None` for any other key.
pub(crate) fn slot_number(resource: &str, key: &str) -> Option<u32> {
    let digits = key.strip_prefix(resource)?.strip_prefix('#')?;
    let spelled = (1..=4).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    spelled.then(|| digits.parse().ok()).flatten()
}

impl Client {
    /// Provisions `resource` and the keys of its slots 0 to `slots - 1`
    /// ([`slot_key`]). Never resets a generation; a key that exists is left
    /// as it is. Provision keys outside a transaction (docs/contract.md).
    pub async fn provision_slots(&self, resource: &str, slots: u32) -> Result<Vec<Provision>, Error> {
        let slots = slot_count(slots)?;
        let mut answers = vec![self.provision(resource).await?];
        for slot in 0..slots {
            answers.push(self.provision(&slot_key(resource, slot as u32)).await?);
        }
        Ok(answers)
    }

    /// Tries to take a free slot of `resource`, which has `slots` slots, for
    /// `length`, with a fresh owner, without waiting while every slot is
    /// held. Granted only while fewer than `slots` holders are live, so
    /// lowering the slot count never lets more than the new count in. An
    /// attempt whose reply was lost is sent again as the same owner, which
    /// confirms the slot it was granted (its generation kept).
    pub async fn acquire_slot(&self, resource: &str, slots: u32, length: Duration) -> Result<AcquireSlot, Error> {
        let retries = Retries::until(self.confirm_until(Instant::now(), length));
        self.acquire_slot_retrying(resource, slots, Uuid::new_v4(), length, retries)
            .await
    }

    /// [`acquire_slot_as`](Client::acquire_slot_as), sent again as the same
    /// owner after a transient failure, until `retries` ends: a reply that
    /// may have been lost is confirmed (a wait for a row given up then
    /// included: only an answer to the same owner rules out the lost
    /// attempt's grant).
    pub(super) async fn acquire_slot_retrying(
        &self,
        resource: &str,
        slots: u32,
        owner: Uuid,
        length: Duration,
        retries: Retries,
    ) -> Result<AcquireSlot, Error> {
        let mut pause = FIRST_PAUSE;
        let mut reached = false;
        loop {
            match self.acquire_slot_attempt(resource, slots, owner, length).await {
                // Its transaction rolled back: nothing was granted, unless an
                // earlier attempt's reply was lost.
                Err(error) if error.gave_up_waiting_for_the_row() && !reached => return Ok(AcquireSlot::row_held()),
                Err(error)
                    if retry_acquire(&error, &mut reached) && later(Instant::now(), pause) < retries.end(reached) =>
                {
                    tracing::debug!(%owner, %error, "acquire of a slot failed; retrying with the same owner");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// Tries once to take a free slot of `resource` as `owner`. Sending it
    /// again as the same owner while it holds a slot extends that slot. A
    /// wait for a fence row given up is `Busy` with no expiry known. The
    /// attempt runs to its end on a task of its own: a caller that stops
    /// waiting for it leaves no slot held, as a slot granted after it was
    /// gone is given back (a slot this owner held already and the call
    /// extended included).
    pub async fn acquire_slot_as(
        &self,
        resource: &str,
        slots: u32,
        owner: Uuid,
        length: Duration,
    ) -> Result<AcquireSlot, Error> {
        match self.acquire_slot_attempt(resource, slots, owner, length).await {
            Err(error) if error.gave_up_waiting_for_the_row() => Ok(AcquireSlot::row_held()),
            other => other,
        }
    }

    /// One attempt, run to its end on a task of its own; a wait for a row
    /// given up is the error it is.
    async fn acquire_slot_attempt(
        &self,
        resource: &str,
        slots: u32,
        owner: Uuid,
        length: Duration,
    ) -> Result<AcquireSlot, Error> {
        slot_resource(resource)?;
        let count = slot_count(slots)?;
        let owner = input::owner(owner)?;
        let seconds = input::lease_seconds(length)?;
        let (client, resource) = (self.clone(), resource.to_string());
        self.to_its_end(Procedure::AcquireSlot, async move {
            client.acquire_slot_once(&resource, count, owner, length, seconds).await
        })
        .await
    }

    /// One `AcquireSlot`, its input checked already, and its answer.
    async fn acquire_slot_once(
        &self,
        key: &str,
        count: i32,
        owner: Uuid,
        length: Duration,
        seconds: i32,
    ) -> Result<AcquireSlot, Error> {
        let sent_at = Instant::now();
        let reply = self
            .call(
                Procedure::AcquireSlot,
                &[&key, &count, &owner, &seconds],
                About::key(key),
            )
            .await?;
        match reply.outcome()? {
            "Acquired" => {
                let slot: i32 = reply.required("Slot")?;
                Ok(AcquireSlot::Acquired {
                    slot: u32::try_from(slot).map_err(|_| reply.unexpected(format!("slot {slot}")))?,
                    lease: Lease::new(
                        reply.required::<&str>("ResourceKey")?,
                        owner,
                        reply.required("Generation")?,
                        length,
                        reply.required_utc("LeaseUntilUtc")?,
                        sent_at,
                    ),
                })
            }
            "Busy" => {
                let server_utc = reply.required_utc("ServerUtc")?;
                let until = reply.utc("LeaseUntilUtc")?.unwrap_or(server_utc);
                Ok(AcquireSlot::Busy {
                    until,
                    remaining: outcome::remaining(until, server_utc),
                })
            }
            "NotProvisioned" => Ok(AcquireSlot::NotProvisioned),
            _ => Err(reply.unknown_outcome()),
        }
    }
}

impl AcquireSlot {
    /// `Busy` with the holders' end unknown: another transaction held a row
    /// longer than `AcquireSlot` waits for it, and nothing was granted.
    fn row_held() -> AcquireSlot {
        AcquireSlot::Busy {
            until: OffsetDateTime::now_utc(),
            remaining: Duration::ZERO,
        }
    }
}

/// `slots` as `@Slots` takes it.
fn slot_count(slots: u32) -> Result<i32, Error> {
    if (1..=MAX_SLOTS).contains(&slots) {
        return Ok(slots as i32);
    }
    Err(Error::invalid(
        Parameter::Slots,
        format!("must be 1 to {MAX_SLOTS}, not {slots}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_key_is_the_resource_a_hash_and_the_number() {
        assert_eq!(slot_key("imports:tenant-7", 0), "imports:tenant-7#0");
    }

    #[test]
    fn only_digits_with_no_leading_zero_spell_a_slot_as_acquire_slot_counts_them() {
        let r = "imports:tenant-7";
        assert_eq!(slot_number(r, "imports:tenant-7#0"), Some(0));
        assert_eq!(slot_number(r, "imports:tenant-7#12"), Some(12));
        assert_eq!(slot_number(r, "imports:tenant-7#9999"), Some(9999));
        for not_a_slot in [
            "imports:tenant-7#01",
            "imports:tenant-7#",
            "imports:tenant-7#1a",
            "imports:tenant-7#10000",
            "imports:tenant-7#-1",
            "imports:tenant-7#\u{0661}",
            "imports:tenant-70#1",
            "imports:tenant-7",
        ] {
            assert_eq!(slot_number(r, not_a_slot), None, "{not_a_slot}");
        }
    }

    #[test]
    fn a_resource_with_slots_leaves_room_for_its_slot_numbers() {
        assert!(slot_resource(&"r".repeat(251)).is_ok());
        let refused = slot_resource(&"r".repeat(252)).unwrap_err();
        assert_eq!(refused.parameter(), Some(Parameter::ResourceKey));
        assert!(slot_resource("r ").is_err(), "a trailing space");
    }

    #[test]
    fn a_slot_count_outside_one_to_a_thousand_is_refused_before_any_call() {
        for slots in [0, MAX_SLOTS + 1] {
            assert!(matches!(
                slot_count(slots),
                Err(Error::InvalidInput {
                    parameter: Parameter::Slots,
                    ..
                })
            ));
        }
    }
}
