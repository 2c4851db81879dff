//! `ListLeases` with the empty prefix, its default, lists every key: the
//! bound it computes from the prefix's last character must not apply when
//! there is none (Babelfish answers 0 for `UNICODE` of the empty string,
//! where SQL Server answers NULL).

use crate::support;

use fencepost::client::admin::LeaseQuery;
use support::TestDatabase;
use support::caller::Caller;

#[tokio::test]
async fn the_empty_prefix_lists_every_key() {
    let test = "the_empty_prefix_lists_every_key";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    for key in ["j", "k"] {
        let answer = caller
            .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key])
            .await;
        assert_eq!(answer.outcome(), "Created");
    }
    let listed = |sql: &'static str| {
        let db = &db;
        async move {
            let rows = db.query(sql).await;
            rows.iter()
                .map(|r| r.get::<&str, _>("ResourceKey").unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed("EXEC fence_admin.ListLeases").await, ["j", "k"], "the defaults");
    assert_eq!(
        listed("EXEC fence_admin.ListLeases @Prefix = N'', @HeldOnly = 0, @MaxRows = 10, @After = NULL").await,
        ["j", "k"]
    );
    assert_eq!(listed("EXEC fence_admin.ListLeases @Prefix = N'k'").await, ["k"]);
    // The operator's listing through the client, which sends the empty prefix.
    let client = support::lease::unwarmed(&db.ado()).await;
    let page = client.admin().list_leases(&LeaseQuery::new()).await.unwrap();
    let keys: Vec<_> = page.leases.iter().map(|lease| lease.key.as_str()).collect();
    assert_eq!(keys, ["j", "k"]);
    drop((client, caller));
    db.drop().await;
}
