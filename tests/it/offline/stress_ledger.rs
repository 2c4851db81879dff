//! The invariant checks find what they are meant to find.

use crate::support::stress_ledger::*;
use fencepost::client::Publish;
use time::OffsetDateTime;
use tokio::time::Instant;
use uuid::Uuid;

fn t(second: i64) -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(second)
}

fn grant(key: &str, owner: Uuid, generation: i64, at: i64) -> Event {
    Event::Granted {
        key: key.into(),
        owner,
        generation,
        decided: t(at),
        until: t(at + 2),
    }
}

fn published(key: &str, owner: Uuid, generation: i64, operation: Uuid, sent: Instant) -> Event {
    Event::Publish {
        key: key.into(),
        owner,
        generation,
        operation,
        payload: format!("{operation}"),
        outcome: Publish::Published,
        replay: false,
        sent,
    }
}

fn table(rows: &[(Uuid, &str, i64, i64)], last: Option<(i64, Uuid)>) -> TableState {
    let mut state = TableState::default();
    for (operation, key, generation, at) in rows {
        state
            .operations
            .insert(*operation, (key.to_string(), *generation, t(*at)));
    }
    state
        .resources
        .insert("k".into(), (last.map(|l| l.0), last.map(|l| l.1.to_string())));
    state
}

#[test]
fn a_clean_history_has_no_violations() {
    let (a, b, op) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let ledger = Ledger {
        events: vec![
            grant("k", a, 1, 0),
            grant("k", b, 2, 3),
            published("k", b, 2, op, Instant::now()),
        ],
    };
    assert_eq!(
        ledger.violations(&table(&[(op, "k", 2, 4)], Some((2, op)))),
        Vec::<String>::new()
    );
}

#[test]
fn a_publish_after_the_lease_ended_or_a_successor_was_granted_is_a_violation() {
    let (a, b, op) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let ledger = Ledger {
        events: vec![
            grant("k", a, 1, 0),
            grant("k", b, 2, 3),
            published("k", a, 1, op, Instant::now()),
        ],
    };
    let found = ledger.violations(&table(&[(op, "k", 1, 4)], Some((1, op))));
    assert!(found.iter().any(|v| v.contains("after its lease ended")), "{found:?}");
    assert!(
        found.iter().any(|v| v.contains("after generation 2 was granted")),
        "{found:?}"
    );
}

#[test]
fn a_generation_granted_twice_or_published_twice_is_a_violation() {
    let (a, b, one, two) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let now = Instant::now();
    let ledger = Ledger {
        events: vec![
            grant("k", a, 1, 0),
            grant("k", b, 1, 1),
            published("k", a, 1, one, now),
            published("k", a, 1, two, now),
        ],
    };
    let found = ledger.violations(&table(&[(one, "k", 1, 1), (two, "k", 1, 1)], Some((1, two))));
    assert!(found.iter().any(|v| v.contains("granted to 2 owners")), "{found:?}");
    assert!(found.iter().any(|v| v.contains("accepted 2 publications")), "{found:?}");
    assert!(found.iter().any(|v| v.contains("granted at")), "{found:?}");
}

#[test]
fn a_table_that_differs_from_the_ledger_is_a_violation() {
    let (a, op) = (Uuid::new_v4(), Uuid::new_v4());
    let ledger = Ledger {
        events: vec![grant("k", a, 1, 0), published("k", a, 1, op, Instant::now())],
    };
    let found = ledger.violations(&table(&[], None));
    assert!(found.iter().any(|v| v.contains("1 missing")), "{found:?}");
    assert!(found.iter().any(|v| v.contains("last accepted publish")), "{found:?}");
}
