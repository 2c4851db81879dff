//! What readers and operators see: `Inspect`, `ListLeases`, `LeaseHistory`
//! and `ContractVersion`. None of them changes anything, and none shows an
//! owner (`LeaseHistory` shows its hash).

use std::cmp::Ordering;

use time::OffsetDateTime;

use super::answer::{History, Inspected, LeaseState, Listed, TenureRow};
use super::check;
use super::refusal::{self, Refusal};
use super::state::{Fence, Resource, owner_hash};

/// The contract version the model states: `ContractVersion`'s answer.
pub const CONTRACT_VERSION: (i32, i32) = (1, 8);

impl Fence {
    /// `Inspect`: the key's lease state as of now.
    pub(super) fn inspect(&self, key: &Option<String>, now: OffsetDateTime) -> Result<Inspected, Refusal> {
        let key = check::key(key)?;
        Ok(match self.resources.get(key) {
            Some(row) => Inspected::Found(lease_state(row, now)),
            None => Inspected::NotProvisioned { server_utc: now },
        })
    }

    /// `ListLeases`: the keys that start with `prefix` (literally), sort
    /// after `after` when given, and are held now when `held_only`, in key
    /// order, at most `max_rows`.
    pub(super) fn list_leases(
        &self,
        prefix: &Option<String>,
        held_only: Option<bool>,
        max_rows: Option<i32>,
        after: &Option<String>,
        now: OffsetDateTime,
    ) -> Result<Vec<Listed>, Refusal> {
        let prefix = prefix.as_deref().ok_or(refusal::PREFIX)?;
        let held_only = held_only.ok_or(refusal::HELD_ONLY)?;
        let max_rows = check::max_rows(max_rows)?;
        let order = self.key_order;
        let mut rows: Vec<Listed> = self
            .resources
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .filter(|(key, _)| {
                after
                    .as_deref()
                    .is_none_or(|after| order.compare(key, after) == Ordering::Greater)
            })
            .filter(|(_, row)| !held_only || row.is_held(now))
            .map(|(key, row)| Listed {
                resource_key: key.clone(),
                state: lease_state(row, now),
            })
            .collect();
        rows.sort_by(|a, b| order.compare(&a.resource_key, &b.resource_key));
        rows.truncate(max_rows);
        Ok(rows)
    }

    /// `LeaseHistory`: the open tenure (a row with an owner, expired or
    /// not) and the ended ones, newest generation first, at most `max_rows`.
    pub(super) fn lease_history(
        &self,
        key: &Option<String>,
        max_rows: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<History, Refusal> {
        let key = check::key(key)?;
        let max_rows = check::max_rows(max_rows)?;
        let Some(row) = self.resources.get(key) else {
            return Ok(History::NotProvisioned { server_utc: now });
        };
        let open = row.owner.map(|owner| TenureRow {
            generation: row.generation,
            owner_hash: owner_hash(owner),
            acquired_at: row.acquired_at,
            ended_at: None,
            ending: None,
            published: row.published_generation == Some(row.generation),
            lease_until: row.lease_until,
            server_utc: now,
            source_version: if row.published_generation == Some(row.generation) {
                row.published_source_version
            } else {
                None
            },
        });
        let ended = self.tenures(key).map(|tenure| TenureRow {
            generation: tenure.generation,
            owner_hash: tenure.owner_hash,
            acquired_at: tenure.acquired_at,
            ended_at: tenure.ended_at,
            ending: Some(tenure.ending),
            published: tenure.published,
            lease_until: None,
            server_utc: now,
            source_version: tenure.source_version,
        });
        let mut rows: Vec<TenureRow> = open.into_iter().chain(ended).collect();
        rows.sort_by_key(|row| std::cmp::Reverse(row.generation));
        rows.truncate(max_rows);
        Ok(History::Found(rows))
    }
}

fn lease_state(row: &Resource, now: OffsetDateTime) -> LeaseState {
    LeaseState {
        generation: row.generation,
        is_held: row.is_held(now),
        lease_until: row.lease_until,
        published_generation: row.published_generation,
        server_utc: now,
        source_version: row.source_version,
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::model::KeyOrder;
    use crate::model::run::Run;
    use crate::model::{Answer, Call, Ending, History, Inspected, LeaseState, Session};

    fn list(prefix: &str, held_only: bool, max_rows: i32, after: Option<&str>) -> Call {
        Call::ListLeases {
            prefix: Some(prefix.into()),
            held_only: Some(held_only),
            max_rows: Some(max_rows),
            after: after.map(str::to_string),
        }
    }

    fn keys(answer: Answer) -> Vec<String> {
        match answer {
            Answer::ListLeases(rows) => rows.into_iter().map(|r| r.resource_key).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn inspect_keeps_an_expired_leases_end_and_says_it_is_not_held() {
        let mut run = Run::with(&["k"]);
        run.acquired("k", Uuid::new_v4(), 5);
        run.later(6);
        assert_eq!(
            run.ok(&Call::inspect("k")),
            Answer::Inspect(Inspected::Found(LeaseState {
                generation: 1,
                is_held: false,
                lease_until: Some(run.at(5)),
                published_generation: None,
                server_utc: run.at(6),
                source_version: None,
            }))
        );
        assert_eq!(
            run.ok(&Call::inspect("none")),
            Answer::Inspect(Inspected::NotProvisioned { server_utc: run.at(6) })
        );
    }

    #[test]
    fn list_leases_matches_the_prefix_literally_in_key_order_after_a_key_and_held_only() {
        let mut run = Run::with(&["a_b", "a%c", "axb", "b", "a"]);
        run.acquired("axb", Uuid::new_v4(), 30);
        assert_eq!(keys(run.ok(&list("a", false, 10, None))), ["a", "a%c", "a_b", "axb"]);
        assert_eq!(keys(run.ok(&list("a_", false, 10, None))), ["a_b"]);
        assert_eq!(keys(run.ok(&list("a", false, 2, None))), ["a", "a%c"]);
        assert_eq!(keys(run.ok(&list("a", false, 10, Some("a%c")))), ["a_b", "axb"]);
        assert_eq!(keys(run.ok(&list("", true, 10, None))), ["axb"]);
        let auto = Session::Autocommit;
        let bad = |prefix: Option<&str>, held: Option<bool>, rows: Option<i32>| Call::ListLeases {
            prefix: prefix.map(str::to_string),
            held_only: held,
            max_rows: rows,
            after: None,
        };
        assert_eq!(run.refused(&bad(None, None, None), auto), 50120);
        assert_eq!(run.refused(&bad(Some(""), None, None), auto), 50121);
        assert_eq!(run.refused(&bad(Some(""), Some(false), Some(0)), auto), 50122);
        assert_eq!(run.refused(&bad(Some(""), Some(false), Some(100_001)), auto), 50122);
    }

    #[test]
    fn lease_history_lists_the_open_tenure_then_the_ended_ones_newest_first() {
        let mut run = Run::with(&["k", "idle"]);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let first = run.acquired("k", a, 30);
        run.ok(&Call::release("k", a, first));
        run.acquired("k", b, 30);
        let History::Found(rows) = (match run.ok(&Call::lease_history("k")) {
            Answer::LeaseHistory(history) => history,
            other => panic!("{other:?}"),
        }) else {
            panic!("found")
        };
        let summary: Vec<_> = rows.iter().map(|r| (r.generation, r.ending, r.lease_until)).collect();
        assert_eq!(
            summary,
            [(2, None, Some(run.at(30))), (1, Some(Ending::Released), None)]
        );
        assert_eq!(rows[0].owner_hash, crate::model::owner_hash(b));
        assert_eq!(
            run.ok(&Call::LeaseHistory {
                resource_key: Some("k".into()),
                max_rows: Some(1)
            }),
            Answer::LeaseHistory(History::Found(rows[..1].to_vec()))
        );
        assert_eq!(
            run.ok(&Call::lease_history("idle")),
            Answer::LeaseHistory(History::Found(vec![]))
        );
        assert_eq!(
            run.ok(&Call::lease_history("none")),
            Answer::LeaseHistory(History::NotProvisioned { server_utc: run.at(0) })
        );
    }

    #[test]
    fn the_contract_version_is_1_8() {
        let mut run = Run::with(&[]);
        assert_eq!(
            run.ok(&Call::ContractVersion),
            Answer::ContractVersion { major: 1, minor: 8 }
        );
    }

    #[test]
    fn list_leases_sorts_and_pages_in_the_fences_key_order() {
        for (order, expected) in [
            (KeyOrder::Padded, ["a\u{1}", "a"]),
            (KeyOrder::CodePoint, ["a", "a\u{1}"]),
        ] {
            let mut run = Run::with(&[]);
            run.fence = crate::model::Fence::with_key_order(order);
            run.ok(&Call::provision("a"));
            run.ok(&Call::provision("a\u{1}"));
            assert_eq!(keys(run.ok(&list("a", false, 10, None))), expected, "{order:?}");
            assert_eq!(
                keys(run.ok(&list("a", false, 10, Some(expected[0])))),
                [expected[1]],
                "{order:?}"
            );
        }
    }
}
