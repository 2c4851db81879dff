//! The parameter checks the procedures make before they touch a table, each
//! with the refusal it raises. A procedure makes its checks in the order of
//! its parameters (the callers in `fence` and `operator` keep that order).

use time::OffsetDateTime;
use uuid::Uuid;

use super::refusal::{self, Refusal};

/// The longest key, in UTF-16 code units (what `nvarchar(256)` stores).
pub const MAX_KEY_UNITS: usize = 256;
/// The longest lease, in seconds.
pub const MAX_LEASE_SECONDS: i32 = 86_400;
/// The most rows `ListLeases` and `LeaseHistory` answer.
pub const MAX_ROWS: i32 = 100_000;
/// The oldest bound of `PruneTenure` and `PruneOutcomes`, in days.
pub const MAX_PRUNE_DAYS: i32 = 36_500;
/// The highest `@Floor` of `Recover` (2^62 - 1).
pub const MAX_FLOOR: i64 = (1 << 62) - 1;

/// 50101: 1 to 256 UTF-16 code units, not ending in a space.
pub(super) fn key(key: &Option<String>) -> Result<&str, Refusal> {
    let Some(key) = key else {
        return Err(refusal::KEY_LENGTH);
    };
    if !(1..=MAX_KEY_UNITS).contains(&key.encode_utf16().count()) {
        return Err(refusal::KEY_LENGTH);
    }
    if key.ends_with(' ') {
        return Err(refusal::KEY_TRAILING_SPACE);
    }
    Ok(key)
}

/// 50102: not NULL, not the nil GUID.
pub(super) fn owner(owner: Option<Uuid>) -> Result<Uuid, Refusal> {
    owner.filter(|o| !o.is_nil()).ok_or(refusal::OWNER)
}

/// 50103: 1 to 86400.
pub(super) fn lease_seconds(seconds: Option<i32>) -> Result<i32, Refusal> {
    seconds
        .filter(|s| (1..=MAX_LEASE_SECONDS).contains(s))
        .ok_or(refusal::LEASE_SECONDS)
}

/// 50104: 1 or more.
pub(super) fn generation(generation: Option<i64>) -> Result<i64, Refusal> {
    generation.filter(|g| *g >= 1).ok_or(refusal::GENERATION)
}

/// 50109 (with the procedure's own message): NULL, or 0 or more.
pub(super) fn source_version(version: Option<i64>, refused: Refusal) -> Result<Option<i64>, Refusal> {
    match version {
        Some(v) if v < 0 => Err(refused),
        other => Ok(other),
    }
}

/// 50105 of an operator command: NULL (no record) or not the nil GUID.
pub(super) fn command_id(id: Option<Uuid>) -> Result<Option<Uuid>, Refusal> {
    match id {
        Some(id) if id.is_nil() => Err(refusal::COMMAND_OPERATION_ID),
        other => Ok(other),
    }
}

/// 50122: 1 to 100000.
pub(super) fn max_rows(rows: Option<i32>) -> Result<usize, Refusal> {
    match rows {
        Some(rows) if (1..=MAX_ROWS).contains(&rows) => Ok(rows as usize),
        _ => Err(refusal::MAX_ROWS),
    }
}

/// 50123: 1 to 36500.
pub(super) fn older_than_days(days: Option<i32>) -> Result<i32, Refusal> {
    days.filter(|d| (1..=MAX_PRUNE_DAYS).contains(d))
        .ok_or(refusal::OLDER_THAN_DAYS)
}

/// `SYSUTCDATETIME()`: the server's clock as `datetime2(7)` keeps it, to
/// 100 ns.
pub(super) fn server_time(now: OffsetDateTime) -> OffsetDateTime {
    let nanos = now.nanosecond();
    now.replace_nanosecond(nanos - nanos % 100)
        .expect("a nanosecond rounded down stays in range")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_counts_utf16_units_so_a_character_outside_the_bmp_counts_two() {
        assert!(key(&Some("😀".repeat(128))).is_ok());
        assert_eq!(key(&Some(format!("{}a", "😀".repeat(128)))), Err(refusal::KEY_LENGTH));
        assert_eq!(key(&Some(String::new())), Err(refusal::KEY_LENGTH));
        assert_eq!(key(&None), Err(refusal::KEY_LENGTH));
        assert_eq!(key(&Some("job ".into())), Err(refusal::KEY_TRAILING_SPACE));
        assert!(key(&Some(" job\t".into())).is_ok(), "only a trailing U+0020 is refused");
    }

    #[test]
    fn the_server_clock_keeps_100_nanoseconds() {
        let t = OffsetDateTime::UNIX_EPOCH.replace_nanosecond(123_456_789).unwrap();
        assert_eq!(server_time(t).nanosecond(), 123_456_700);
    }
}
