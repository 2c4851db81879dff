//! The client's own check of each argument, so a bad call fails with the
//! parameter named before any round trip. The procedures check again: they
//! are the authority for callers in other languages.

use std::time::Duration;

use uuid::Uuid;

use super::error::Error;
use super::parameter::Parameter;

/// The longest key the contract allows, in UTF-16 code units: what
/// `nvarchar(256)` stores, so a character outside the Basic Multilingual Plane
/// counts two.
pub const MAX_KEY_UTF16_UNITS: usize = 256;
/// The longest lease the contract allows.
pub const MAX_LEASE: Duration = Duration::from_secs(86_400);

/// A key is an exact identifier. One that ends in a space is refused: SQL
/// Server's comparisons ignore trailing spaces, so `"job "` would otherwise be
/// the fence of `"job"`.
pub(crate) fn key(key: &str) -> Result<&str, Error> {
    let units = key.encode_utf16().count();
    if units == 0 || units > MAX_KEY_UTF16_UNITS {
        return Err(Error::invalid(
            Parameter::ResourceKey,
            format!("must be 1 to {MAX_KEY_UTF16_UNITS} UTF-16 code units long, not {units}"),
        ));
    }
    if key.ends_with(' ') {
        return Err(Error::invalid(
            Parameter::ResourceKey,
            "must not end with a space: keys are exact identifiers",
        ));
    }
    Ok(key)
}

/// A source version (contract v1.4) is 0 or more: the procedures refuse a
/// negative one with 50109.
pub(crate) fn source_version(version: Option<i64>) -> Result<Option<i64>, Error> {
    match version {
        Some(v) if v < 0 => Err(Error::invalid(
            Parameter::SourceVersion,
            format!("must be 0 or more, not {v}"),
        )),
        other => Ok(other),
    }
}

/// The lease length in whole seconds. A sub-second part is refused rather than
/// rounded: rounding down could hand out a shorter lease than asked for, and
/// rounding up a longer one than the caller planned its work around.
pub(crate) fn lease_seconds(length: Duration) -> Result<i32, Error> {
    if length.subsec_nanos() != 0 {
        return Err(Error::invalid(
            Parameter::LeaseSeconds,
            format!("must be whole seconds, not {length:?}"),
        ));
    }
    if length.is_zero() || length > MAX_LEASE {
        return Err(Error::invalid(
            Parameter::LeaseSeconds,
            format!(
                "must be between 1 and {} seconds, not {}",
                MAX_LEASE.as_secs(),
                length.as_secs()
            ),
        ));
    }
    // At most 86400, so it fits.
    Ok(length.as_secs() as i32)
}

/// The most rows `fence_admin.ListLeases` or `LeaseHistory` answers in one call.
pub const MAX_ROWS: u32 = 100_000;
/// The oldest bound `fence_admin.PruneTenure` takes, in days (about a century).
pub const MAX_PRUNE_DAYS: u32 = 36_500;
/// The highest `@Floor` a recovery takes (2^62 - 1): the epoch above it still
/// fits a bigint.
pub const MAX_RECOVERY_FLOOR: i64 = (1 << 62) - 1;

/// A row limit of `ListLeases` or `LeaseHistory`: 1 to [`MAX_ROWS`].
pub(crate) fn max_rows(rows: u32) -> Result<i32, Error> {
    match i32::try_from(rows) {
        Ok(rows) if (1..=MAX_ROWS as i32).contains(&rows) => Ok(rows),
        _ => Err(Error::invalid(
            Parameter::MaxRows,
            format!("must be 1 to {MAX_ROWS}, not {rows}"),
        )),
    }
}

/// `PruneTenure`'s bound: 1 to [`MAX_PRUNE_DAYS`] days.
pub(crate) fn older_than_days(days: u32) -> Result<i32, Error> {
    match i32::try_from(days) {
        Ok(days) if (1..=MAX_PRUNE_DAYS as i32).contains(&days) => Ok(days),
        _ => Err(Error::invalid(
            Parameter::OlderThanDays,
            format!("must be 1 to {MAX_PRUNE_DAYS} days, not {days}"),
        )),
    }
}

/// A recovery's floor: 0 to [`MAX_RECOVERY_FLOOR`], or none.
pub(crate) fn recovery_floor(floor: Option<i64>) -> Result<Option<i64>, Error> {
    match floor {
        Some(f) if !(0..=MAX_RECOVERY_FLOOR).contains(&f) => Err(Error::invalid(
            Parameter::Floor,
            format!("must be 0 to {MAX_RECOVERY_FLOOR}, not {f}"),
        )),
        other => Ok(other),
    }
}

pub(crate) fn recovery_id(id: Uuid) -> Result<Uuid, Error> {
    non_nil(Parameter::RecoveryId, id)
}

pub(crate) fn database_identity(identity: Option<Uuid>) -> Result<Option<Uuid>, Error> {
    identity.map(|id| non_nil(Parameter::DatabaseIdentity, id)).transpose()
}

pub(crate) fn owner(owner: Uuid) -> Result<Uuid, Error> {
    non_nil(Parameter::Owner, owner)
}

pub(crate) fn operation_id(operation_id: Uuid) -> Result<Uuid, Error> {
    non_nil(Parameter::OperationId, operation_id)
}

fn non_nil(parameter: Parameter, id: Uuid) -> Result<Uuid, Error> {
    if id.is_nil() {
        return Err(Error::invalid(parameter, "must not be the nil id"));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_and_256_code_units_pass_and_0_and_257_do_not() {
        assert!(key("k").is_ok());
        assert!(key(&"é".repeat(256)).is_ok());
        assert!(key(&"😀".repeat(128)).is_ok());
        assert_eq!(
            key(&format!("{}k", "😀".repeat(128))).unwrap_err().parameter(),
            Some(Parameter::ResourceKey),
            "a character outside the BMP counts two, as nvarchar stores it"
        );
        assert_eq!(key("").unwrap_err().parameter(), Some(Parameter::ResourceKey));
        assert_eq!(
            key(&"k".repeat(257)).unwrap_err().parameter(),
            Some(Parameter::ResourceKey)
        );
    }

    #[test]
    fn a_key_ending_in_a_space_is_refused_and_inner_and_leading_spaces_are_kept() {
        assert_eq!(key("job ").unwrap_err().parameter(), Some(Parameter::ResourceKey));
        assert_eq!(key("   ").unwrap_err().parameter(), Some(Parameter::ResourceKey));
        assert!(key(" job").is_ok());
        assert!(key("daily job").is_ok());
    }

    #[test]
    fn lease_lengths_must_be_whole_seconds_within_a_day() {
        assert_eq!(lease_seconds(Duration::from_secs(1)).unwrap(), 1);
        assert_eq!(lease_seconds(MAX_LEASE).unwrap(), 86_400);
        for bad in [
            Duration::ZERO,
            Duration::from_millis(500),
            Duration::from_millis(1500),
            MAX_LEASE + Duration::from_secs(1),
        ] {
            let err = lease_seconds(bad).unwrap_err();
            assert_eq!(err.parameter(), Some(Parameter::LeaseSeconds), "{bad:?}");
        }
    }

    #[test]
    fn the_operators_bounds_are_the_procedures_own() {
        assert_eq!(max_rows(1).unwrap(), 1);
        assert_eq!(max_rows(MAX_ROWS).unwrap(), 100_000);
        for bad in [0, MAX_ROWS + 1, u32::MAX] {
            assert_eq!(
                max_rows(bad).unwrap_err().parameter(),
                Some(Parameter::MaxRows),
                "{bad}"
            );
        }
        assert_eq!(older_than_days(36_500).unwrap(), 36_500);
        assert_eq!(
            older_than_days(0).unwrap_err().parameter(),
            Some(Parameter::OlderThanDays)
        );
        assert_eq!(
            recovery_floor(Some(MAX_RECOVERY_FLOOR)).unwrap(),
            Some(4_611_686_018_427_387_903)
        );
        assert_eq!(recovery_floor(None).unwrap(), None);
        for bad in [-1, MAX_RECOVERY_FLOOR + 1] {
            assert_eq!(
                recovery_floor(Some(bad)).unwrap_err().parameter(),
                Some(Parameter::Floor)
            );
        }
        assert_eq!(
            recovery_id(Uuid::nil()).unwrap_err().parameter(),
            Some(Parameter::RecoveryId)
        );
        assert_eq!(
            database_identity(Some(Uuid::nil())).unwrap_err().parameter(),
            Some(Parameter::DatabaseIdentity)
        );
        assert_eq!(database_identity(None).unwrap(), None);
    }

    #[test]
    fn nil_ids_are_refused_with_the_parameter_named() {
        assert_eq!(owner(Uuid::nil()).unwrap_err().parameter(), Some(Parameter::Owner));
        assert_eq!(
            operation_id(Uuid::nil()).unwrap_err().parameter(),
            Some(Parameter::OperationId)
        );
        assert!(owner(Uuid::new_v4()).is_ok());
    }
}
