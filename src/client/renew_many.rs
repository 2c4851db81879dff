//! `fence_api.RenewMany` (contract v1.7): many leases renewed in one call,
//! each judged as `Renew` judges one.

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

use tokio::time::Instant;

use super::contract::Procedure;
use super::error::Error;
use super::parameter::Parameter;
use super::span::About;
use super::{Client, Lease, Renew, input};

/// The most leases one call renews: what the procedure takes.
pub const MAX_RENEW_MANY: usize = 1000;

/// How long the procedure waits for a row another transaction holds before
/// it renews nothing and fails (its `SET LOCK_TIMEOUT 1000`).
pub(crate) const ROW_WAIT_BOUND: Duration = Duration::from_secs(1);

impl Client {
    /// Renews every lease of `leases` in one call, each as
    /// [`renew`](Client::renew) renews one: a lease still held is extended by
    /// its length from now (server clock) and answers `Renewed`, its expiry
    /// and local deadline moved forward; one that ended, was released or was
    /// taken over answers `Lost` and is never revived. One answer per lease,
    /// in the order given. At most 1000 leases, each key once.
    ///
    /// The call waits at most a second for a fence row that another
    /// session's transaction holds; then it renews nothing and fails
    /// (a server error, 50129 on SQL Server): renew those leases one by one,
    /// or in smaller calls. [`LeaseGuard`](super::LeaseGuard)s renew
    /// together through it, and do that by themselves. On any error every
    /// lease of `leases` is left as it was.
    pub async fn renew_many(&self, leases: &mut [Lease]) -> Result<Vec<Renew>, Error> {
        let (answers, sent_at) = self.renew_many_timed(leases).await?;
        apply_answers(leases, &answers, sent_at)
    }

    /// One call of `RenewMany` for `leases`: each key's answer, and the
    /// local instant just before the request was sent, which a renewed
    /// lease's local deadline counts from.
    pub(crate) async fn renew_many_timed(&self, leases: &[Lease]) -> Result<(HashMap<String, Renew>, Instant), Error> {
        let json = leases_json(leases)?;
        let sent_at = Instant::now();
        let replies = self.call_rows(Procedure::RenewMany, &[&json], About::default()).await?;
        let mut answers = HashMap::with_capacity(replies.len());
        for reply in &replies {
            let key: String = reply.required::<&str>("ResourceKey")?.to_string();
            let answer = match reply.outcome()? {
                "Renewed" => Renew::Renewed {
                    until: reply.required_utc("LeaseUntilUtc")?,
                },
                "Lost" => Renew::Lost,
                _ => return Err(reply.unknown_outcome()),
            };
            super::meter::renewal_result(match answer {
                Renew::Renewed { .. } => "Renewed",
                Renew::Lost => "Lost",
            });
            answers.insert(key, answer);
        }
        Ok((answers, sent_at))
    }
}

/// Each lease's answer in `answers`, the renewed ones moved forward as of
/// `sent_at`.
fn apply_answers(
    leases: &mut [Lease],
    answers: &HashMap<String, Renew>,
    sent_at: Instant,
) -> Result<Vec<Renew>, Error> {
    // Every answer is read before any lease is changed: on an error each
    // lease stays as it was.
    let renews = leases
        .iter()
        .map(|lease| {
            answers.get(lease.key()).copied().ok_or_else(|| Error::UnexpectedReply {
                procedure: Procedure::RenewMany.name(),
                detail: format!("no row for the key {:?}", lease.key()),
            })
        })
        .collect::<Result<Vec<Renew>, Error>>()?;
    for (lease, renew) in leases.iter_mut().zip(&renews) {
        if let Renew::Renewed { until } = renew {
            lease.renewed(*until, sent_at);
        }
    }
    Ok(renews)
}

/// `@Leases` for `leases`, checked as the procedure checks it, so a bad
/// call fails with the parameter named before any round trip.
///
/// Written by hand: the shape is fixed, and the only text in it is each key,
/// escaped as JSON requires (a quotation mark, a backslash and every control
/// character); the client's default build has no JSON crate.
pub(crate) fn leases_json(leases: &[Lease]) -> Result<String, Error> {
    if leases.is_empty() || leases.len() > MAX_RENEW_MANY {
        return Err(Error::invalid(
            Parameter::Leases,
            format!("must hold 1 to {MAX_RENEW_MANY} leases, not {}", leases.len()),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(leases.len());
    let mut json = String::with_capacity(leases.len() * 120);
    json.push('[');
    for (i, lease) in leases.iter().enumerate() {
        let key = input::key(lease.key())?;
        if !seen.insert(key) {
            return Err(Error::invalid(
                Parameter::Leases,
                format!("holds the key {key:?} twice: each key may appear once"),
            ));
        }
        let seconds = input::lease_seconds(lease.length())?;
        if i > 0 {
            json.push(',');
        }
        json.push_str("{\"ResourceKey\":");
        push_json_string(&mut json, key);
        let _ = write!(
            json,
            ",\"Owner\":\"{}\",\"Generation\":{},\"LeaseSeconds\":{seconds}}}",
            lease.owner().hyphenated(),
            lease.generation()
        );
    }
    json.push(']');
    Ok(json)
}

/// `text` as a JSON string: quoted, with a quotation mark, a backslash and
/// every control character escaped (RFC 8259, section 7).
fn push_json_string(json: &mut String, text: &str) {
    json.push('"');
    for c in text.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(json, "\\u{:04x}", u32::from(c));
            }
            c => json.push(c),
        }
    }
    json.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_reply_missing_a_key_leaves_every_lease_as_it_was() {
        let mut leases = [
            Lease::for_test_key("a", Duration::from_secs(30)),
            Lease::for_test_key("b", Duration::from_secs(30)),
        ];
        let before = leases.clone();
        tokio::time::advance(Duration::from_secs(10)).await;
        let until = leases[0].until() + time::Duration::seconds(10);
        let answers = HashMap::from([("a".to_string(), Renew::Renewed { until })]);
        let error = apply_answers(&mut leases, &answers, Instant::now()).unwrap_err();
        assert!(error.to_string().contains("\"b\""), "{error}");
        for (lease, was) in leases.iter().zip(&before) {
            assert_eq!(
                lease.until(),
                was.until(),
                "{} was renewed by a call that failed",
                lease.key()
            );
            assert_eq!(lease.local_deadline(), was.local_deadline(), "{}", lease.key());
        }
    }

    #[test]
    fn a_key_is_escaped_as_json_requires_and_nothing_more() {
        let mut json = String::new();
        push_json_string(&mut json, "a\"b\\c\n\u{1}é😀/");
        assert_eq!(json, "\"a\\\"b\\\\c\\u000a\\u0001é😀/\"");
    }

    #[test]
    fn the_leases_are_one_json_array_of_objects_in_order() {
        let a = Lease::for_test_key("a,b", Duration::from_secs(30));
        let b = Lease::for_test_key("c", Duration::from_secs(60));
        let json = leases_json(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(
            json,
            format!(
                "[{{\"ResourceKey\":\"a,b\",\"Owner\":\"{}\",\"Generation\":{},\"LeaseSeconds\":30}},\
                 {{\"ResourceKey\":\"c\",\"Owner\":\"{}\",\"Generation\":{},\"LeaseSeconds\":60}}]",
                a.owner(),
                a.generation(),
                b.owner(),
                b.generation()
            )
        );
    }

    #[test]
    fn no_leases_too_many_or_a_key_twice_are_refused_before_any_round_trip() {
        let lease = |key: &str| Lease::for_test_key(key, Duration::from_secs(30));
        for (leases, said) in [
            (Vec::new(), "1 to 1000 leases, not 0"),
            (
                (0..=MAX_RENEW_MANY).map(|i| lease(&i.to_string())).collect(),
                "not 1001",
            ),
            (vec![lease("k"), lease("k")], "twice"),
        ] {
            match leases_json(&leases) {
                Err(Error::InvalidInput { parameter, reason }) => {
                    assert_eq!(parameter, Parameter::Leases);
                    assert!(reason.contains(said), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
