//! A lease set (contract v1.8): several keys one owner took in one
//! `AcquireSet`, each with its own generation, held all or nothing.

use std::fmt::Write;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;
use uuid::Uuid;

use super::Lease;
use super::error::Error;
use super::input;
use super::json_text::push_json_string;
use super::parameter::Parameter;

/// The most keys one set holds: what the set procedures take.
pub const MAX_SET_KEYS: usize = 1000;

/// The leases of one set, in the order the server locks them (binary key
/// order). Every lease has the set's owner and length; each has its own
/// generation. `Debug` leaves the owner out, as [`Lease`]'s does.
#[derive(Clone, Debug)]
pub struct LeaseSet {
    leases: Vec<Lease>,
}

impl LeaseSet {
    pub(crate) fn new(leases: Vec<Lease>) -> Self {
        LeaseSet { leases }
    }

    /// Each key's lease, in the server's lock order.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// The lease on `key`, if the set holds it.
    pub fn lease(&self, key: &str) -> Option<&Lease> {
        self.leases.iter().find(|lease| lease.key() == key)
    }

    /// The keys, in the server's lock order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.leases.iter().map(Lease::key)
    }

    /// The owner id every key of the set is held by.
    pub fn owner(&self) -> Uuid {
        self.leases[0].owner()
    }

    /// The set's lease length; renewals ask for the same.
    pub fn length(&self) -> Duration {
        self.leases[0].length()
    }

    /// The expiry on the server clock, the same for every key.
    pub fn until(&self) -> OffsetDateTime {
        self.leases[0].until()
    }

    /// The local instant by which every key has certainly ended unless
    /// renewed (see [`Lease::local_deadline`]).
    pub fn local_deadline(&self) -> Instant {
        self.leases[0].local_deadline()
    }

    pub(crate) fn renewed(&mut self, until: OffsetDateTime, sent_at: Instant) {
        for lease in &mut self.leases {
            lease.renewed(until, sent_at);
        }
    }
}

/// `@ResourceKeys` for `keys`, checked as `AcquireSet` checks it, so a bad
/// call fails with the parameter named before any round trip.
pub(crate) fn keys_json<'k>(keys: &[&'k str]) -> Result<(String, Vec<&'k str>), Error> {
    if keys.is_empty() || keys.len() > MAX_SET_KEYS {
        return Err(Error::invalid(
            Parameter::ResourceKeys,
            format!("must hold 1 to {MAX_SET_KEYS} keys, not {}", keys.len()),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(keys.len());
    let mut checked = Vec::with_capacity(keys.len());
    let mut json = String::with_capacity(keys.len() * 40);
    json.push('[');
    for (i, key) in keys.iter().enumerate() {
        let key = input::key(key).map_err(|error| in_list(error, Parameter::ResourceKeys))?;
        if !seen.insert(key) {
            return Err(Error::invalid(
                Parameter::ResourceKeys,
                format!("holds the key {key:?} twice: each key may appear once"),
            ));
        }
        if i > 0 {
            json.push(',');
        }
        push_json_string(&mut json, key);
        checked.push(key);
    }
    json.push(']');
    Ok((json, checked))
}

/// `@Leases` for `set`: each key with its generation, and with `extra`'s
/// fields for that lease (a publish's operation id and payload).
pub(crate) fn leases_json(set: &LeaseSet, mut extra: impl FnMut(usize, &mut String)) -> String {
    let mut json = String::with_capacity(set.leases.len() * 60);
    json.push('[');
    for (i, lease) in set.leases.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str("{\"ResourceKey\":");
        push_json_string(&mut json, lease.key());
        let _ = write!(json, ",\"Generation\":{}", lease.generation());
        extra(i, &mut json);
        json.push('}');
    }
    json.push(']');
    json
}

/// A key's own refusal, told as the list parameter it came in.
fn in_list(error: Error, list: Parameter) -> Error {
    match error {
        Error::InvalidInput { reason, .. } => Error::invalid(list, format!("a key {reason}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_one_json_array_of_strings_in_the_order_given() {
        let (json, keys) = keys_json(&["b", "a\"q"]).unwrap();
        assert_eq!(json, "[\"b\",\"a\\\"q\"]");
        assert_eq!(keys, ["b", "a\"q"]);
    }

    #[test]
    fn a_key_given_twice_or_no_key_at_all_is_refused_before_any_call() {
        for keys in [&["a", "a"][..], &[][..], &["a "][..]] {
            let error = keys_json(keys).unwrap_err();
            assert!(
                matches!(
                    error,
                    Error::InvalidInput {
                        parameter: Parameter::ResourceKeys,
                        ..
                    }
                ),
                "{error:?}"
            );
        }
    }

    #[test]
    fn each_lease_of_a_set_is_sent_with_its_own_generation() {
        let set = LeaseSet::new(vec![
            Lease::for_test_key("a", Duration::from_secs(30)),
            Lease::for_test_key("b\\", Duration::from_secs(30)),
        ]);
        let json = leases_json(&set, |i, json| json.push_str(&format!(",\"N\":{i}")));
        assert_eq!(
            json,
            "[{\"ResourceKey\":\"a\",\"Generation\":1,\"N\":0},{\"ResourceKey\":\"b\\\\\",\"Generation\":1,\"N\":1}]"
        );
    }
}
