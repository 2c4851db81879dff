//! `fence_api.RenewMany` (contract v1.7) on a live engine: each lease of a
//! call judged as `Renew` judges one (a lost key answers `Lost` alone and the
//! others are renewed, a key taken over or expired is never revived), bad
//! input refused with 50133 and nothing changed, keys of every shape read
//! exactly, a row another transaction holds ending the call after a bounded
//! wait with nothing renewed, and a client's guards renewing in a few calls
//! instead of one each. The tests share one database: each works on keys of
//! its own.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, Error, Lease, Parameter, Release, Renew};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{acquired, provisioned, state, wait_until_expired, worker};
use tokio::time::Instant;
use uuid::Uuid;

/// A lease no test outlasts.
const LONG: Duration = Duration::from_secs(120);

async fn take(client: &Client, name: &str, length: Duration) -> (String, Lease) {
    let key = provisioned(client, name).await;
    let lease = acquired(client.acquire(&key, length).await.unwrap());
    (key, lease)
}

#[tokio::test]
async fn a_call_with_lost_keys_answers_lost_for_each_of_them_alone_and_renews_the_rest() {
    const TEST: &str = "a_call_with_lost_keys_answers_lost_for_each_of_them_alone_and_renews_the_rest";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, rival] = support::lease::workers(&db.ado()).await;
    let (a, lease_a) = take(&client, "a", LONG).await;
    let (c, lease_c) = take(&client, "c", LONG).await;
    // Taken over: b's lease ran out and a rival holds it now.
    let (b, lease_b) = take(&client, "b", Duration::from_secs(1)).await;
    wait_until_expired(&client, &b).await;
    let rivals = acquired(rival.acquire(&b, LONG).await.unwrap());
    // Expired with nobody after it: d.
    let (d, lease_d) = take(&client, "d", Duration::from_secs(1)).await;
    wait_until_expired(&client, &d).await;
    // Released by its holder, then presented again: e.
    let (e, lease_e) = take(&client, "e", LONG).await;
    assert_eq!(client.release(&lease_e).await.unwrap(), Release::Released);
    let before = [
        state(&client, &a).await,
        state(&client, &b).await,
        state(&client, &c).await,
    ];

    let mut leases = [lease_a.clone(), lease_b, lease_c.clone(), lease_d, lease_e];
    let answers = client.renew_many(&mut leases).await.unwrap();
    assert!(matches!(answers[0], Renew::Renewed { .. }), "{answers:?}");
    assert_eq!(answers[1], Renew::Lost);
    assert!(matches!(answers[2], Renew::Renewed { .. }), "{answers:?}");
    assert_eq!(answers[3], Renew::Lost);
    assert_eq!(answers[4], Renew::Lost);

    let after_a = state(&client, &a).await;
    let after_c = state(&client, &c).await;
    assert!(
        after_a.2 > before[0].2 && after_c.2 > before[2].2,
        "a and c were not extended"
    );
    assert_eq!(
        leases[0].until(),
        after_a.2.unwrap(),
        "the lease moved with its renewal"
    );
    assert!(leases[0].local_deadline() > lease_a.local_deadline());
    assert_eq!(state(&client, &b).await, before[1], "the rival's lease on b changed");
    let (_, d_held, _, _) = state(&client, &d).await;
    let (_, e_held, _, _) = state(&client, &e).await;
    assert!(!d_held && !e_held, "an expired or released lease was revived");
    // The superseded holder's renewal left the rival's lease as it was; the
    // rival renews it as usual.
    let mut rivals_lease = [rivals];
    assert!(matches!(
        rival.renew_many(&mut rivals_lease).await.unwrap()[..],
        [Renew::Renewed { .. }]
    ));
    for lease in [&leases[0], &leases[2]] {
        assert_eq!(client.release(lease).await.unwrap(), Release::Released);
    }
    assert_eq!(rival.release(&rivals_lease[0]).await.unwrap(), Release::Released);
    drop((client, rival));
    db.drop().await;
}

#[tokio::test]
async fn keys_with_quotes_backslashes_control_characters_and_surrogate_pairs_are_renewed_exactly() {
    const TEST: &str = "keys_with_quotes_backslashes_control_characters_and_surrogate_pairs_are_renewed_exactly";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let unique = Uuid::new_v4().simple().to_string();
    let keys = [
        format!("q\"u\\o\\\\te:{unique}"),
        format!("tab\there\nline\u{1}:{unique}"),
        format!("\\u0041 not an escape:{unique}"),
        format!(
            "every control character {}:{unique}",
            (1u8..32).map(char::from).collect::<String>()
        ),
        format!("backslash n \\n, t \\t, quote \\\", at the end:{unique}\\"),
        format!("emoji 😀 and é:{unique}"),
        // 256 UTF-16 code units, 32 of them in surrogate pairs.
        format!("{}{}", "😀".repeat(16), "k".repeat(256 - 32 - 32)) + &unique,
    ];
    let mut leases = Vec::new();
    for key in &keys {
        assert!(key.encode_utf16().count() <= 256, "{key}");
        client.provision(key).await.unwrap();
        leases.push(acquired(client.acquire(key, LONG).await.unwrap()));
    }
    // A key that differs from the first only by its escapes' reading.
    let lookalike = format!("q\\\"u\\\\o\\\\\\\\te:{unique}");
    client.provision(&lookalike).await.unwrap();
    let other = acquired(client.acquire(&lookalike, LONG).await.unwrap());
    let other_before = state(&client, &lookalike).await;

    let answers = client.renew_many(&mut leases).await.unwrap();
    for (key, answer) in keys.iter().zip(&answers) {
        assert!(matches!(answer, Renew::Renewed { .. }), "{key:?}: {answer:?}");
    }
    assert_eq!(state(&client, &lookalike).await, other_before);
    for lease in leases.iter().chain([&other]) {
        assert_eq!(client.release(lease).await.unwrap(), Release::Released);
    }
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn bad_input_is_refused_with_50133_and_changes_nothing() {
    const TEST: &str = "bad_input_is_refused_with_50133_and_changes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let (key, lease) = take(&client, "kept", LONG).await;
    let before = state(&client, &key).await;
    let item = |key: &str, owner: &str, generation: &str, seconds: &str| {
        format!(r#"{{"ResourceKey":"{key}","Owner":"{owner}","Generation":{generation},"LeaseSeconds":{seconds}}}"#)
    };
    let (owner, generation) = (lease.owner().to_string(), lease.generation().to_string());
    let good = item(&key, &owner, &generation, "60");
    let long_key = "k".repeat(257);
    let bad = [
        "NULL".to_string(),
        "N'not json'".to_string(),
        "N'[]'".to_string(),
        "N'{\"ResourceKey\":\"x\"}'".to_string(),
        format!("N'[{good},{}]'", item(&key, &owner, &generation, "60")),
        format!("N'[{good},{}]'", item("other", "not-a-uuid", "1", "60")),
        format!(
            "N'[{good},{}]'",
            item("other", "00000000-0000-0000-0000-000000000000", "1", "60")
        ),
        format!("N'[{good},{}]'", item("other", &owner, "0", "60")),
        format!("N'[{good},{}]'", item("other", &owner, "\"x\"", "60")),
        format!("N'[{good},{}]'", item("other", &owner, "1", "0")),
        format!("N'[{good},{}]'", item("other", &owner, "1", "86401")),
        format!("N'[{good},{}]'", item("other", &owner, "1", "1.5")),
        format!("N'[{good},{}]'", item("trailing ", &owner, "1", "60")),
        format!("N'[{good},{}]'", item("", &owner, "1", "60")),
        format!("N'[{good},{}]'", item(&long_key, &owner, "1", "60")),
        format!(
            "N'[{good},{}]'",
            r#"{"Owner":"6F9619FF-8B86-D011-B42D-00C04FC964FF","Generation":1,"LeaseSeconds":5}"#
        ),
        // A JSON number that is not an integer as written, though its value is.
        format!("N'[{good},{}]'", item("other", &owner, "1e1", "60")),
        format!("N'[{good},{}]'", item("other", &owner, "1", "6E+1")),
        // An item that is not an object: an array holding one.
        format!("N'[[{good}]]'"),
        format!("N'[{good},[{}]]'", item("other", &owner, "1", "60")),
        // 257 UTF-16 code units in 241 characters.
        format!(
            "N'[{good},{}]'",
            item(&format!("{}{}", "😀".repeat(16), "k".repeat(225)), &owner, "1", "60")
        ),
        format!(
            "N'[{}]'",
            (0..1001)
                .map(|i| item(&format!("k{i}"), &owner, "1", "60"))
                .collect::<Vec<_>>()
                .join(",")
        ),
    ];
    // A NUL character or half a surrogate pair: a key no Babelfish database
    // can hold (PostgreSQL's text has neither), which its JSON reader
    // refuses with an error of its own. SQL Server holds such keys.
    let unreadable = [
        format!("N'[{good},{}]'", item("a\\u0000b", &owner, "1", "60")),
        format!("N'[{good},{}]'", item("a\\ud800b", &owner, "1", "60")),
        format!("N'[{good},{}]'", item("a\\udc00b", &owner, "1", "60")),
        format!("N'[{good},{}]'", item("a\\ud800\\u0041", &owner, "1", "60")),
        // The halves in the wrong order, and apart by an escaped backslash.
        format!("N'[{good},{}]'", item("a\\udc00\\ud800b", &owner, "1", "60")),
        format!("N'[{good},{}]'", item("a\\ud83d\\\\\\ude00b", &owner, "1", "60")),
    ];
    let babelfish = db.is_babelfish().await;
    let bad = if babelfish {
        bad.into_iter().chain(unreadable.clone()).collect::<Vec<_>>()
    } else {
        for leases in &unreadable {
            let rows = db.query(&format!("EXEC fence_api.RenewMany @Leases = {leases};")).await;
            assert_eq!(rows.len(), 2, "{leases}");
        }
        bad.to_vec()
    };
    for leases in &bad {
        let error = db
            .refusal(&format!("EXEC fence_api.RenewMany @Leases = {leases};"))
            .await;
        match &error {
            tiberius::error::Error::Server(token) => {
                assert_eq!(token.code(), 50133, "{leases}: {error}");
                assert!(token.message().contains("@Leases"), "{leases}: {error}");
            }
            other => panic!("{leases}: {other}"),
        }
        let open = db.query("SELECT @@TRANCOUNT;").await[0].get::<i32, usize>(0);
        assert_eq!(open, Some(0), "{leases} left a transaction open");
        assert_eq!(state(&client, &key).await, before, "{leases} changed the lease");
    }
    // A pair escaped in capitals is one character, as in lower case.
    let rows = db
        .query(&format!(
            "EXEC fence_api.RenewMany @Leases = N'[{good},{}]';",
            item("a\\uD83D\\uDE00b", &owner, "1", "60")
        ))
        .await;
    assert_eq!(rows.len(), 2, "an escaped pair in capitals was refused");
    // JSON may begin with any of its whitespace.
    for blank in ["NCHAR(10)", "NCHAR(13) + NCHAR(10)", "NCHAR(9) + N' '"] {
        let rows = db
            .query(&format!(
                "DECLARE @Leases nvarchar(max) = {blank} + N'[{good}]'; EXEC fence_api.RenewMany @Leases = @Leases;"
            ))
            .await;
        assert_eq!(rows.len(), 1, "{blank}");
        assert_eq!(rows[0].get::<&str, _>("Outcome"), Some("Renewed"), "{blank}");
    }
    // The client refuses before any round trip.
    let sent = client.requests_sent();
    match client.renew_many(&mut []).await {
        Err(Error::InvalidInput { parameter, .. }) => assert_eq!(parameter, Parameter::Leases),
        other => panic!("{other:?}"),
    }
    let mut twice = [lease.clone(), lease.clone()];
    assert!(matches!(
        client.renew_many(&mut twice).await,
        Err(Error::InvalidInput {
            parameter: Parameter::Leases,
            ..
        })
    ));
    assert_eq!(client.requests_sent(), sent, "a refused call was sent");
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_row_another_transaction_holds_ends_the_call_after_a_second_with_nothing_renewed() {
    const TEST: &str = "a_row_another_transaction_holds_ends_the_call_after_a_second_with_nothing_renewed";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let mut holder = Caller::new(db.connect().await);
    let (held, lease_held) = take(&client, "held", LONG).await;
    let (free, lease_free) = take(&client, "free", LONG).await;
    // A first call on this session compiles RenewMany, out of the timing.
    let mut warm = [lease_free.clone()];
    client.renew_many(&mut warm).await.unwrap();
    let before = state(&client, &free).await;
    holder
        .batch(&format!(
            "BEGIN TRANSACTION; UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = N'{held}';"
        ))
        .await
        .unwrap();
    let started = Instant::now();
    let mut both = [lease_free.clone(), lease_held.clone()];
    let error = client.renew_many(&mut both).await.unwrap_err();
    let waited = started.elapsed();
    assert!(
        error.to_string().contains("lock timeout") || error.server_number() == Some(50129),
        "{error}"
    );
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    assert_eq!(
        state(&client, &free).await,
        before,
        "a lease was renewed by a call that failed"
    );
    holder.rollback().await;
    assert_eq!(client.release(&lease_free).await.unwrap(), Release::Released);
    assert_eq!(client.release(&lease_held).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_clients_guards_renew_together_in_a_few_calls_not_one_each() {
    const TEST: &str = "a_clients_guards_renew_together_in_a_few_calls_not_one_each";
    const GUARDS: usize = 40;
    // Renewed every 2 s; each guard's first renewal is confirmed about 4 s in.
    const LENGTH: Duration = Duration::from_secs(6);
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.max_connections(2).allow_privileged_login(true);
    let client = Client::connect_with(config).await.unwrap();
    support::lease::warm_up(&client).await;
    let mut keys = Vec::new();
    for _ in 0..GUARDS {
        keys.push(provisioned(&client, "together").await);
    }
    let mut guards = Vec::new();
    for key in &keys {
        match client.acquire(key, LENGTH).await.unwrap() {
            Acquire::Acquired(lease) => guards.push(client.guard(lease)),
            other => panic!("{other:?}"),
        }
    }
    let first = guards
        .iter()
        .map(|guard| guard.lease().local_deadline())
        .collect::<Vec<_>>();
    let sent = client.requests_sent();
    // Until every guard has renewed twice: its deadline moved on by more
    // than one renewal period.
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let renewed_twice = guards
            .iter()
            .zip(&first)
            .all(|(guard, first)| guard.lease().local_deadline() > *first + LENGTH / 3 + Duration::from_millis(500));
        if renewed_twice {
            break;
        }
        assert!(Instant::now() < give_up, "the guards did not renew twice");
        for guard in &guards {
            assert_eq!(guard.lost_reason(), None);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let calls = client.requests_sent() - sent;
    // Two renewals of 40 guards: 80 calls one by one. Together, about one
    // call a tick; the acquisitions spread over a tick or two.
    assert!(
        calls <= 12,
        "{GUARDS} guards sent {calls} renewal calls for two renewals each"
    );
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), Release::Released);
    }
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn one_row_another_transaction_holds_leaves_every_other_guard_of_its_call_renewed() {
    const TEST: &str = "one_row_another_transaction_holds_leaves_every_other_guard_of_its_call_renewed";
    free_guards_renewed_while_rows_are_held(TEST, 8, 8, true).await;
}

#[tokio::test]
async fn half_the_rows_of_a_call_held_leave_every_free_guard_of_it_renewed() {
    const TEST: &str = "half_the_rows_of_a_call_held_leave_every_free_guard_of_it_renewed";
    // More rows held than single renewals once ran at a time after a call
    // waited out its lock bound.
    free_guards_renewed_while_rows_are_held(TEST, 24, 2, true).await;
}

#[tokio::test]
async fn with_no_row_held_every_guard_of_a_call_is_renewed() {
    // The control of the two above: the same guards, the same measure.
    const TEST: &str = "with_no_row_held_every_guard_of_a_call_is_renewed";
    free_guards_renewed_while_rows_are_held(TEST, 24, 2, false).await;
}

/// `guards` leases of 12 s guarded by one client, every `held_every`th
/// one's row held (when `hold`) by another session's transaction: each
/// guard whose row is free renews past its first length and is never lost.
/// 12 s, so that the measure is the product's waits (a second's lock bound,
/// a renewal a third into the lease), not a loaded machine's.
async fn free_guards_renewed_while_rows_are_held(test: &str, guards: usize, held_every: usize, hold: bool) {
    const LENGTH: Duration = Duration::from_secs(12);
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.max_connections(2).allow_privileged_login(true);
    let client = Client::connect_with(config).await.unwrap();
    support::lease::warm_up(&client).await;
    let mut holder = Caller::new(db.connect().await);
    let mut keys = Vec::new();
    for _ in 0..guards {
        keys.push(provisioned(&client, "blocked").await);
    }
    let mut leases = Vec::new();
    for key in &keys {
        leases.push(acquired(client.acquire(key, LENGTH).await.unwrap()));
    }
    // Renewed all at once, each alone and together: the client's renewal
    // connections are open, and RenewMany compiled on them, before any row
    // is held, so no renewal below waits for a sign-in.
    let renewed = futures_util::future::join_all(leases.iter_mut().map(|lease| client.renew(lease))).await;
    for renew in renewed {
        assert!(matches!(renew.unwrap(), Renew::Renewed { .. }));
    }
    let mut singles: Vec<[Lease; 1]> = leases.iter().map(|lease| [lease.clone()]).collect();
    let warmed = futures_util::future::join_all(singles.iter_mut().map(|one| client.renew_many(one))).await;
    for (lease, (one, answer)) in leases.iter_mut().zip(singles.into_iter().zip(warmed)) {
        answer.unwrap();
        *lease = one[0].clone();
    }
    let held: Vec<String> = keys.iter().step_by(held_every).map(|key| format!("N'{key}'")).collect();
    holder
        .batch(&format!(
            "BEGIN TRANSACTION; UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey IN ({}) AND {};",
            held.join(","),
            if hold { "1 = 1" } else { "1 = 0" }
        ))
        .await
        .unwrap();
    let guards = leases.into_iter().map(|lease| client.guard(lease)).collect::<Vec<_>>();
    let free: Vec<_> = guards
        .iter()
        .zip(&keys)
        .enumerate()
        .filter(|(i, _)| i % held_every != 0)
        .map(|(_, pair)| pair)
        .collect();
    let first = free
        .iter()
        .map(|(guard, _)| guard.lease().local_deadline())
        .collect::<Vec<_>>();
    // Until every free guard has renewed past its first length while the
    // rows are held (each time in a call with held keys, or beside them),
    // none of them lost.
    let give_up = Instant::now() + Duration::from_secs(60);
    let lost: Vec<String> = loop {
        let renewed = free
            .iter()
            .zip(&first)
            .all(|((guard, _), first)| guard.lease().local_deadline() > *first + LENGTH + Duration::from_millis(200));
        let lost: Vec<String> = free
            .iter()
            .filter_map(|(guard, key)| guard.lost_reason().map(|reason| format!("{key}: {reason}")))
            .collect();
        if renewed || !lost.is_empty() || Instant::now() >= give_up {
            break lost;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let free_count = free.len();
    let renewed = free
        .iter()
        .zip(&first)
        .all(|((guard, _), first)| guard.lease().local_deadline() > *first + LENGTH + Duration::from_millis(200));
    drop(free);
    holder.rollback().await;
    // A held guard may have been given up meanwhile, as it would alone.
    for guard in guards {
        let _ = guard.release().await;
    }
    drop(client);
    db.drop().await;
    assert!(
        lost.is_empty(),
        "{} of {free_count} guards whose rows are free were lost behind other keys' locks: {lost:#?}",
        lost.len()
    );
    assert!(renewed, "the free guards did not renew");
}

/// After a recovery raises the generation floor past 18 digits, every
/// generation has 19: RenewMany renews them as Renew does, up to the
/// largest bigint.
#[tokio::test]
async fn generations_of_19_digits_are_renewed_together_as_alone() {
    // A database of its own: the floor raises every key's generation.
    let Some(db) = TestDatabase::deployed("renew_many_gen19").await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let key = provisioned(&client, "gen19").await;
    let mut recovery = fencepost::client::admin::Recovery::new(Uuid::new_v4());
    // The highest floor Recover takes: every generation after it has 19 digits.
    recovery.floor((1 << 62) - 1);
    client.admin().recover(&recovery).await.unwrap();
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    assert!(
        lease.generation() >= 1_000_000_000_000_000_000,
        "{}",
        lease.generation()
    );

    let mut alone = lease.clone();
    assert!(matches!(client.renew(&mut alone).await.unwrap(), Renew::Renewed { .. }));
    let mut many = [lease];
    let answers = client.renew_many(&mut many).await;
    assert!(
        matches!(answers.as_deref(), Ok([Renew::Renewed { .. }])),
        "a 19-digit generation Renew renews is refused together: {answers:?}"
    );
    // One past the largest bigint is refused as a generation, not converted.
    let mut caller = Caller::new(db.connect().await);
    let json = format!(
        "[{{\"ResourceKey\":\"{key}\",\"Owner\":\"{}\",\"Generation\":9223372036854775808,\"LeaseSeconds\":60}}]",
        many[0].owner()
    );
    match caller.call("EXEC fence_api.RenewMany @Leases = @P1", &[&json]).await {
        support::caller::Answer::Error { number, message } => {
            assert_eq!(number, 50133, "{message}");
            assert!(message.contains("Generation"), "{message}");
        }
        support::caller::Answer::Row(_) => panic!("a generation past the largest bigint was renewed"),
    }
    assert_eq!(client.release(&many[0]).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}

/// Keys Acquire takes whose text looks like a JSON number with an exponent
/// are renewed together as alone: only numbers are checked for one.
#[tokio::test]
async fn keys_shaped_like_numbers_with_exponents_are_renewed_together() {
    const TEST: &str = "keys_shaped_like_numbers_with_exponents_are_renewed_together";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    // Digits only, so each key is made of a number's characters alone.
    let unique = Uuid::new_v4().as_u128();
    let keys = [
        format!(":1e5{unique}"),
        format!("{unique}:2e3,4"),
        format!("{unique}:1E+2}}"),
        format!("plain:{unique}"),
    ];
    let mut leases = Vec::new();
    for key in &keys {
        client.provision(key).await.unwrap();
        leases.push(acquired(client.acquire(key, LONG).await.unwrap()));
    }
    let answers = client.renew_many(&mut leases).await;
    assert!(
        matches!(
            answers.as_deref(),
            Ok([
                Renew::Renewed { .. },
                Renew::Renewed { .. },
                Renew::Renewed { .. },
                Renew::Renewed { .. }
            ])
        ),
        "{answers:?}"
    );
    for lease in &leases {
        assert_eq!(client.release(lease).await.unwrap(), Release::Released);
    }
    drop(client);
    db.drop().await;
}
