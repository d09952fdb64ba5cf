//! Connection faults under load on MariaDB (the load and its checks:
//! `syncstore_tests::connection_faults`): four threads push continuously,
//! each retrying a retryable error under the same commit id, while
//!
//! - `killed-connections`: every server connection of the storage — found
//!   in `information_schema.PROCESSLIST` by its database — is killed with
//!   `KILL CONNECTION` from a side connection,
//!   `SYNCSTORE_KILL_BACKEND_ROUNDS` times (default 3), on the test server
//!   (`SYNCSTORE_MARIADB_URL`) in a scratch database;
//! - `server-restart`: the server stops and starts again,
//!   `SYNCSTORE_RESTART_ROUNDS` times (default 1): a clean `SHUTDOWN` in
//!   odd rounds, a crash (`SIGKILL`) in even ones, down for
//!   `SYNCSTORE_OUTAGE_SECS` (default 3) in odd rounds and twice that in
//!   even ones. The server is a throwaway one of the test's own
//!   (`syncstore_tests::mariadb_server`: `mariadb-install-db` and
//!   `mariadbd` on a free port), so the shared server is never stopped; a
//!   machine where it cannot start fails the test with the reason. The
//!   storage keeps the default checkout wait, as deployed.
//!
//! Afterwards every acknowledged push is stored, one commit each; the
//! first push after the kills, or after the server accepted connections
//! again, is acknowledged within one second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sync_mariadb::scratch::ScratchDatabase;
use sync_mariadb::{MariadbConfig, MariadbStorage};
use syncstore_tests::connection_faults::{env_number, run_family, PUSHERS};
use syncstore_tests::mariadb::{connect, kill_connections_of};
use syncstore_tests::mariadb_server::ThrowawayServer;
use syncstore_tests::mariadb_url;

#[test]
fn mariadb_pushes_survive_killed_connections() {
    let rounds = env_number("SYNCSTORE_KILL_BACKEND_ROUNDS", 3);
    let url = mariadb_url();
    let scratch = ScratchDatabase::create(
        &sync_mariadb::MariadbUrl::parse(&url).unwrap_or_else(|e| panic!("{url}: {e:?}")),
    )
    .unwrap_or_else(|e| {
        panic!("MariaDB is not reachable at {url} ({e:?}); start it or set SYNCSTORE_MARIADB_URL")
    });
    let database = scratch.url().database().to_owned();
    let config = MariadbConfig {
        pool_size: PUSHERS as u32,
        pool_wait_ms: 2_000,
        ..MariadbConfig::default()
    };
    let storage = MariadbStorage::connect_to(scratch.url().clone(), config)
        .unwrap_or_else(|e| panic!("connect: {e:?}"));
    let admin = Mutex::new(connect(&url).unwrap_or_else(|e| panic!("admin connection: {e}")));
    let killed = Mutex::new(Vec::new());
    run_family("killed-connections", "mariadb", &storage, rounds, &|| {
        let mut admin = admin.lock().unwrap_or_else(|p| p.into_inner());
        let count = kill_connections_of(&mut admin, &database)
            .unwrap_or_else(|e| panic!("killed-connections: {e}"));
        assert!(
            count > 0,
            "killed-connections: the storage had no connection to kill"
        );
        killed.lock().unwrap_or_else(|p| p.into_inner()).push(count);
        // The first push after the kills is timed from here.
        Some(Instant::now())
    });
    let killed = killed.into_inner().unwrap_or_else(|p| p.into_inner());
    println!("killed-connections mariadb: connections killed per round {killed:?}");
}

#[test]
fn mariadb_pushes_survive_server_restarts() {
    let rounds = env_number("SYNCSTORE_RESTART_ROUNDS", 1);
    let server = ThrowawayServer::start().unwrap_or_else(|reason| {
        panic!(
            "server-restart mariadb: cannot start a throwaway MariaDB server: {reason} \
             (the test needs mariadb-install-db and mariadbd; it never restarts the shared server)"
        )
    });
    let base = Duration::from_secs(env_number("SYNCSTORE_OUTAGE_SECS", 3));
    // The default checkout wait, as deployed.
    let deployed = MariadbConfig {
        pool_size: PUSHERS as u32,
        ..MariadbConfig::default()
    };
    let storage = MariadbStorage::connect(&server.url(), deployed)
        .unwrap_or_else(|e| panic!("connect to the throwaway server: {e:?}"));
    let server = Mutex::new(server);
    let round = std::cell::Cell::new(0u32);
    run_family("server-restart", "mariadb", &storage, rounds, &|| {
        round.set(round.get() + 1);
        let mut server = server.lock().unwrap_or_else(|p| p.into_inner());
        let stopped = if round.get() % 2 == 1 {
            server.shutdown()
        } else {
            server.crash()
        };
        stopped.unwrap_or_else(|e| panic!("server-restart round {}: stop: {e}", round.get()));
        // The outage itself, not a wait for anything: the server is down.
        std::thread::sleep(base * (2 - round.get() % 2));
        let back = server
            .start_again()
            .unwrap_or_else(|e| panic!("server-restart round {}: start: {e}", round.get()));
        Some(back)
    });
    drop(storage);
    let server = server.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(server.is_running(), "the server runs at the end");
}
