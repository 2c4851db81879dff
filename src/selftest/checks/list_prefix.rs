//! ListLeases takes its prefix literally: LIKE's wildcards and a full-width
//! percent sign in it match only themselves, whatever the database's
//! default collation.

use anyhow::Result;

use crate::client::admin::LeaseQuery;
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::Context;

pub(crate) const CHECK: Check = Check {
    name: "list_prefix_is_literal",
    behaviour: "keys 50％off:a, 50%off:b, 50_off:c, [ab]:d and a:e (under the selftest's prefix); ListLeases with each \
                of the prefixes 50％off, 50%off, 50_off and [ab]",
    document: "engines.md ListLeases row (the prefix escaped under Latin1_General_100_BIN2); B16",
    expected: "each prefix lists exactly its own key: no wildcard, and ％ never taken for % under a \
               width-insensitive collation",
    run: |ctx| Box::pin(run(ctx)),
};

/// (the prefix listed, the one key it must list), each under the selftest's prefix.
const CASES: [(&str, &str); 4] = [
    ("50％off", "50％off:a"),
    ("50%off", "50%off:b"),
    ("50_off", "50_off:c"),
    ("[ab]", "[ab]:d"),
];

async fn run(ctx: &Context) -> Result<Verdict> {
    if !ctx.engine.may_list_leases {
        return Ok(Verdict::skipped(
            "this login may not run fence_admin.ListLeases (it needs fence_operator)",
        ));
    }
    let client = ctx.client().await?;
    let root = format!("{}list/", ctx.keys.prefix());
    for (_, key) in CASES {
        let _ = client.provision(&ctx.keys.key(&format!("list/{key}"))).await?;
    }
    let _ = client.provision(&ctx.keys.key("list/a:e")).await?;
    let mut held = true;
    let mut seen = Vec::new();
    for (prefix, key) in CASES {
        let mut query = LeaseQuery::new();
        query.prefix(&format!("{root}{prefix}")).max_rows(10);
        let page = client.admin().list_leases(&query).await?;
        let listed: Vec<&str> = page
            .leases
            .iter()
            .map(|l| l.key.strip_prefix(&root).unwrap_or(&l.key))
            .collect();
        held &= listed == [key];
        seen.push(format!("{prefix} → {}", listed.join(" ")));
    }
    Ok(Verdict::judge(held, seen.join("; ")))
}
