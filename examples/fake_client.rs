//! A service's own unit tests on `Client::fake()`: its worker, which
//! rebuilds a report under a lease, driven through a publish, a result the
//! fence refuses (`Superseded`), a lost lease, and an outcome first unknown
//! then settled as `AlreadyPublished`, with no database and on tokio's
//! paused clock (a 30 s lease costs no real time).
//!
//! ```text
//! cargo test --features fake --example fake_client   # the service's tests
//! cargo run --features fake --example fake_client    # the same four stories, told
//! ```
//!
//! The worker takes a `Client`, the type it would hold in production: the
//! fake is that same type, so the worker has no generic parameter for its
//! tests' sake.

use std::time::Duration;

use fencepost::CancellationToken;
use fencepost::Client;
use fencepost::client::fake::Fault;
use fencepost::client::{Error, Fenced, Procedure, Publish, RefusalReason};
use fencepost::model::Call;

const REPORT: &str = "report:daily";
const LEASE: Duration = Duration::from_secs(30);

/// What became of one rebuild, as the service reports it.
#[derive(Debug, PartialEq, Eq)]
pub enum Rebuilt {
    /// Published under this generation.
    Published(i64),
    /// The fence refused the result.
    Refused(RefusalReason),
    /// The lease was lost while the work ran; the work was stopped.
    Lost,
    /// The publish's outcome was unknown; settling it answered this.
    Settled(Publish),
}

/// The service's worker: builds the report with `build` under a lease and
/// publishes it. A publish whose outcome stays unknown is settled, asked
/// again every few seconds until the fence answers.
pub async fn rebuild<F, Fut>(client: &Client, build: F) -> Result<Rebuilt, Error>
where
    F: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = Result<String, std::io::Error>> + Send + 'static,
{
    Ok(match client.run_fenced(REPORT, LEASE, build).await? {
        Fenced::Published { generation, .. } => Rebuilt::Published(generation),
        Fenced::Refused(reason) => Rebuilt::Refused(reason),
        Fenced::Lost(_) => Rebuilt::Lost,
        Fenced::Unknown(unsettled) => loop {
            match client.settle(&unsettled).await {
                Ok(answer) => break Rebuilt::Settled(answer),
                Err(_) => tokio::time::sleep(Duration::from_secs(5)).await,
            }
        },
        other => panic!("the report is provisioned at start-up and nobody else rebuilds it: {other:?}"),
    })
}

/// A build that takes `time` (on the tokio clock) and stops when told to.
async fn build_for(time: Duration, stop: CancellationToken) -> Result<String, std::io::Error> {
    tokio::select! {
        () = tokio::time::sleep(time) => Ok("{\"rows\":42}".to_string()),
        () = stop.cancelled() => Err(std::io::Error::other("stopped: the lease was lost")),
    }
}

/// A client of a fresh fake, with the report provisioned as the service's
/// start-up does.
async fn fake() -> Client {
    let client = Client::fake();
    client.provision(REPORT).await.expect("the fake provisions");
    client
}

/// A build longer than two leases: the guard's renewals keep the lease.
pub async fn published() -> Result<Rebuilt, Error> {
    rebuild(&fake().await, |stop| build_for(LEASE * 2, stop)).await
}

/// An operator fences the worker out just as its build ends, before a
/// renewal could have noticed: the publish is refused.
pub async fn superseded() -> Result<Rebuilt, Error> {
    let client = fake().await;
    let operator = client.as_fake().expect("a fake").clone();
    rebuild(&client, move |stop| async move {
        let built = build_for(Duration::from_secs(1), stop).await;
        operator
            .call(&Call::force_release(REPORT))
            .expect("the operator's force-release");
        built
    })
    .await
}

/// No renewal gets through (the network to the database is down): the
/// guard gives the lease up before it can have ended, and stops the build.
pub async fn lost() -> Result<Rebuilt, Error> {
    let client = fake().await;
    let fake = client.as_fake().expect("a fake");
    fake.fail_every(Procedure::Renew, Fault::RequestLost);
    rebuild(&client, |stop| build_for(LEASE * 2, stop)).await
}

/// The publish commits and its reply is lost, and every replay is lost on
/// the way until the lease ends; when the network is back, settling finds
/// the publish committed.
pub async fn unknown_then_settled() -> Result<Rebuilt, Error> {
    let client = fake().await;
    let fake = client.as_fake().expect("a fake").clone();
    fake.fail_next(Procedure::Publish, Fault::ReplyLost);
    fake.fail_every(Procedure::Publish, Fault::RequestLost);
    let worker = tokio::spawn(async move { rebuild(&client, |stop| build_for(Duration::from_secs(1), stop)).await });
    tokio::time::sleep(LEASE * 2).await;
    fake.clear_faults();
    worker.await.expect("the worker ran")
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Error> {
    println!("a long build, renewed: {:?}", published().await?);
    println!("fenced out as it finished: {:?}", superseded().await?);
    println!("no renewal got through: {:?}", lost().await?);
    println!("an unknown publish, settled: {:?}", unknown_then_settled().await?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_long_build_is_published_under_its_renewed_lease() {
        assert_eq!(published().await.unwrap(), Rebuilt::Published(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_build_fenced_out_as_it_finished_is_refused_as_superseded() {
        assert_eq!(superseded().await.unwrap(), Rebuilt::Refused(RefusalReason::Superseded));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_no_renewal_confirms_is_lost_and_the_build_stopped() {
        assert_eq!(lost().await.unwrap(), Rebuilt::Lost);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_publish_is_settled_as_already_published() {
        assert_eq!(
            unknown_then_settled().await.unwrap(),
            Rebuilt::Settled(Publish::AlreadyPublished)
        );
    }
}
