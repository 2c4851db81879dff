//! Leases as an operator looks at them: one resource with the server clock it
//! was read at, and many at once in key order (`fence_admin.ListLeases`).
//! Like `Inspect`, neither ever shows an owner.

use time::OffsetDateTime;

use super::Admin;
use crate::client::api::{inspection, lease_state};
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::span::About;
use crate::client::{Error, Inspection, LeaseState, input};

/// What `Inspect` answered for a key, with the server clock it answered at,
/// which the row carries also when the key has no fence row: what an
/// operator's report is stamped with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspected {
    /// The resource's lease state, as [`Client::inspect`](crate::Client::inspect) gives it.
    pub inspection: Inspection,
    /// The server clock when it answered.
    pub server_utc: OffsetDateTime,
}

/// Which resources [`Admin::list_leases`] lists. Setters take `&mut self`
/// and chain:
///
/// ```
/// # use fencepost::client::admin::LeaseQuery;
/// let mut query = LeaseQuery::new();
/// query.prefix("report:").held_only(true).max_rows(100);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseQuery {
    prefix: String,
    held_only: bool,
    max_rows: u32,
    after: Option<String>,
}

impl Default for LeaseQuery {
    fn default() -> Self {
        LeaseQuery::new()
    }
}

impl LeaseQuery {
    /// Every resource, at most 1000 (the procedure's own default).
    pub fn new() -> Self {
        LeaseQuery {
            prefix: String::new(),
            held_only: false,
            max_rows: 1000,
            after: None,
        }
    }

    /// Only keys that start with `prefix`, matched literally (no wildcards).
    pub fn prefix(&mut self, prefix: &str) -> &mut Self {
        self.prefix = prefix.to_string();
        self
    }

    /// Only leases held now (server clock).
    pub fn held_only(&mut self, held_only: bool) -> &mut Self {
        self.held_only = held_only;
        self
    }

    /// At most this many rows, 1 to [`MAX_ROWS`](super::MAX_ROWS).
    pub fn max_rows(&mut self, max_rows: u32) -> &mut Self {
        self.max_rows = max_rows;
        self
    }

    /// Only keys after `key`: the last key of the previous page
    /// ([`LeasePage::next_after`]).
    pub fn after(&mut self, key: &str) -> &mut Self {
        self.after = Some(key.to_string());
        self
    }
}

/// One resource of a [`LeasePage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedLease {
    /// The resource key.
    pub key: String,
    /// Its lease state, as `Inspect` shows it.
    pub state: LeaseState,
}

/// The resources `ListLeases` answered, in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeasePage {
    /// The resources, in key order (binary comparison).
    pub leases: Vec<ListedLease>,
    max_rows: u32,
}

impl LeasePage {
    /// Whether the page stopped at the query's `max_rows`, so there may be
    /// more after it.
    pub fn is_full(&self) -> bool {
        self.leases.len() == self.max_rows as usize
    }

    /// Where the next page starts ([`LeaseQuery::after`]), when this one is full.
    pub fn next_after(&self) -> Option<&str> {
        self.leases.last().filter(|_| self.is_full()).map(|l| l.key.as_str())
    }

    /// The server clock when it answered; `None` for an empty page.
    pub fn server_utc(&self) -> Option<OffsetDateTime> {
        self.leases.first().map(|l| l.state.server_utc)
    }
}

impl Admin {
    /// What `Inspect` answers for `key`, with the server clock of the reply.
    /// The login needs `fence_reader` (or `fence_service`).
    pub async fn inspect(&self, key: &str) -> Result<Inspected, Error> {
        let key = input::key(key)?;
        let reply = self.client.call(Procedure::Inspect, &[&key], About::key(key)).await?;
        inspected(&reply)
    }

    /// The resources `query` selects, in key order, with their leases.
    pub async fn list_leases(&self, query: &LeaseQuery) -> Result<LeasePage, Error> {
        let max_rows = input::max_rows(query.max_rows)?;
        let (prefix, held_only) = (query.prefix.as_str(), query.held_only);
        // @After only when given: a NULL of no declared type is refused by
        // some engines' RPC parsers, and the parameter's default is NULL anyway.
        let replies = match query.after.as_deref() {
            Some(after) => {
                self.client
                    .call_rows(
                        Procedure::ListLeases,
                        &[&prefix, &held_only, &max_rows, &after],
                        About::default(),
                    )
                    .await?
            }
            None => {
                self.client
                    .call_rows(
                        Procedure::ListLeases,
                        &[&prefix, &held_only, &max_rows],
                        About::default(),
                    )
                    .await?
            }
        };
        lease_page(&replies, query.max_rows)
    }
}

fn inspected(reply: &Reply) -> Result<Inspected, Error> {
    Ok(Inspected {
        inspection: inspection(reply)?,
        server_utc: reply.required_utc("ServerUtc")?,
    })
}

fn lease_page(replies: &[Reply], max_rows: u32) -> Result<LeasePage, Error> {
    let leases = replies
        .iter()
        .map(|reply| match reply.outcome()? {
            "Found" => Ok(ListedLease {
                key: reply.required::<&str>("ResourceKey")?.to_string(),
                state: lease_state(reply)?,
            }),
            _ => Err(reply.unknown_outcome()),
        })
        .collect::<Result<_, _>>()?;
    Ok(LeasePage { leases, max_rows })
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::super::test_rows::{Cell, big, bit, reply, text, utc};
    use super::*;

    const NOW: OffsetDateTime = datetime!(2025-03-01 12:00:00.1234567 UTC);
    const UNTIL: OffsetDateTime = datetime!(2025-03-01 12:00:30.5 UTC);

    fn listed(key: &str, held: bool) -> Vec<Cell> {
        vec![
            text("Outcome", Some("Found")),
            text("ResourceKey", Some(key)),
            big("Generation", Some(7)),
            bit("IsHeld", Some(held)),
            utc("LeaseUntilUtc", Some(UNTIL)),
            big("PublishedGeneration", None),
            utc("ServerUtc", Some(NOW)),
            big("SourceVersion", Some(5)),
        ]
    }

    #[test]
    fn a_listed_row_reads_as_its_key_and_lease_state() {
        let page = lease_page(&[reply(Procedure::ListLeases, listed("report:a", true))], 10).unwrap();
        assert_eq!(
            page.leases,
            [ListedLease {
                key: "report:a".into(),
                state: LeaseState {
                    generation: 7,
                    is_held: true,
                    lease_until: Some(UNTIL),
                    published_generation: None,
                    server_utc: NOW,
                    source_version: Some(5),
                },
            }]
        );
        assert_eq!(page.server_utc(), Some(NOW));
        assert!(!page.is_full());
        assert_eq!(page.next_after(), None);
    }

    #[test]
    fn a_full_page_names_where_the_next_one_starts() {
        let rows = [
            reply(Procedure::ListLeases, listed("a", false)),
            reply(Procedure::ListLeases, listed("b", true)),
        ];
        let page = lease_page(&rows, 2).unwrap();
        assert!(page.is_full());
        assert_eq!(page.next_after(), Some("b"));
        let empty = lease_page(&[], 2).unwrap();
        assert_eq!((empty.is_full(), empty.server_utc()), (false, None));
    }

    #[test]
    fn a_listed_row_without_its_key_is_outside_the_contract() {
        let mut cells = listed("a", false);
        cells.retain(|(name, ..)| *name != "ResourceKey");
        let error = lease_page(&[reply(Procedure::ListLeases, cells)], 10).unwrap_err();
        assert!(matches!(error, Error::UnexpectedReply { .. }), "{error:?}");
        assert!(error.to_string().contains("fence_admin.ListLeases"), "{error}");
    }

    #[test]
    fn an_inspection_of_a_missing_key_keeps_the_server_clock() {
        let missing = reply(
            Procedure::Inspect,
            vec![
                text("Outcome", Some("NotProvisioned")),
                big("Generation", None),
                bit("IsHeld", None),
                utc("LeaseUntilUtc", None),
                big("PublishedGeneration", None),
                utc("ServerUtc", Some(NOW)),
                big("SourceVersion", None),
            ],
        );
        assert_eq!(
            inspected(&missing).unwrap(),
            Inspected {
                inspection: Inspection::NotProvisioned,
                server_utc: NOW,
            }
        );
    }

    #[test]
    fn a_query_starts_at_every_resource_and_its_setters_chain() {
        let mut query = LeaseQuery::new();
        assert_eq!(query, LeaseQuery::default());
        query.prefix("p").held_only(true).max_rows(3).after("p1");
        assert_eq!(
            (
                query.prefix.as_str(),
                query.held_only,
                query.max_rows,
                query.after.as_deref()
            ),
            ("p", true, 3, Some("p1"))
        );
    }
}
