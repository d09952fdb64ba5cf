//! Inspection works against a real Postgres hot standby: a throwaway
//! primary and a streaming standby (`initdb`, `pg_basebackup -R`, `pg_ctl`)
//! on free local ports under a temporary directory, apart from the test
//! server. `status`, `checkpoints`, `rows` and `commits` answer on the
//! standby exactly as on the primary; `status` reads the fence trigger's
//! state there (a trigger disabled on the primary is reported by the
//! standby); a write command is refused with a coded error.
//!
//! The server binaries are `SYNCSTORE_PG_BIN`, else the newest
//! `/usr/lib/postgresql/<version>/bin`. Without them the test FAILS — it is
//! never skipped. Run as root, the clusters run as the `postgres` user.
//!
//! Replication is waited for without sleeping: the primary lists the standby
//! as synchronous, and a barrier write committed with `synchronous_commit =
//! remote_apply` returns only once the standby has applied everything
//! before it.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{seed_todos, syncstore, todos_schema, write_file, Db};
use serde_json::Value;

/// The directory of `initdb`, `pg_ctl` and `pg_basebackup`.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SYNCSTORE_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) under /usr/lib/postgresql; \
             install the server package or set SYNCSTORE_PG_BIN — this test is never skipped"
        )
    })
}

fn output_of(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A free local TCP port (bound and released).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    listener.local_addr().expect("its address").port()
}

/// A throwaway primary and its streaming standby; both stopped on drop.
struct Pair {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    primary_port: u16,
    standby_port: u16,
    started: Vec<PathBuf>,
}

impl Pair {
    fn new() -> Self {
        let bin = bin_dir();
        for tool in ["initdb", "pg_ctl", "pg_basebackup"] {
            assert!(
                bin.join(tool).exists(),
                "{tool} is missing from {} (SYNCSTORE_PG_BIN) — this test is never skipped",
                bin.display()
            );
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        // initdb refuses to run as root: the clusters then belong to `postgres`.
        let as_postgres = output_of(Command::new("id").arg("-u")) == "0";
        if as_postgres {
            let uid: u32 = output_of(Command::new("id").args(["-u", "postgres"]))
                .parse()
                .expect("the uid of postgres");
            let gid: u32 = output_of(Command::new("id").args(["-g", "postgres"]))
                .parse()
                .expect("the gid of postgres");
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("hand the directory to postgres");
        }
        let mut pair = Self {
            dir,
            bin,
            as_postgres,
            primary_port: free_port(),
            standby_port: free_port(),
            started: Vec::new(),
        };
        let primary = pair.path("primary");
        pair.tool("initdb")
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-N", "-D"])
            .arg(&primary)
            .output()
            .expect("initdb runs")
            .status
            .success()
            .then_some(())
            .expect("initdb of the primary");
        // Commits never wait for the standby unless a session asks for
        // `remote_apply` (the barrier); the standby is synchronous for those.
        pair.start(
            &primary,
            pair.primary_port,
            "-c synchronous_standby_names=* -c synchronous_commit=local",
        );
        pair
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A server tool, run as `postgres` when the test runs as root.
    fn tool(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    fn start(&mut self, data: &Path, port: u16, extra: &str) {
        let log = data.with_extension("log");
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off {extra}",
            self.dir.path().display()
        );
        let out = self
            .tool("pg_ctl")
            .args(["-w", "-t", "60", "-D"])
            .arg(data)
            .arg("-l")
            .arg(&log)
            .args(["-o", &options, "start"])
            .output()
            .expect("pg_ctl runs");
        assert!(
            out.status.success(),
            "starting {}: {}\n{}",
            data.display(),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        self.started.push(data.to_owned());
    }

    /// `pg_basebackup -R` of the primary, started as a hot standby.
    fn start_standby(&mut self) {
        let standby = self.path("standby");
        let out = self
            .tool("pg_basebackup")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-X", "stream", "-R"])
            .args(["--no-sync", "-p", &self.primary_port.to_string(), "-D"])
            .arg(&standby)
            .output()
            .expect("pg_basebackup runs");
        assert!(
            out.status.success(),
            "pg_basebackup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.start(&standby, self.standby_port, "-c hot_standby=on");
    }

    fn url(port: u16) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/postgres")
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for data in self.started.iter().rev() {
            let _ = self
                .tool("pg_ctl")
                .args(["-m", "immediate", "-D"])
                .arg(data)
                .arg("stop")
                .output();
        }
    }
}

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Commits a write on the primary that returns only once the standby has
/// applied it (and so everything committed before it).
fn barrier(primary: &mut postgres::Client) {
    primary
        .batch_execute(
            "SET synchronous_commit = remote_apply; \
             CREATE TABLE IF NOT EXISTS public.standby_barrier (n int); \
             INSERT INTO public.standby_barrier VALUES (1)",
        )
        .expect("the barrier write");
}

fn run_on(url: &str, args: &[&str]) -> common::Run {
    let mut all = vec!["--db", url];
    all.extend_from_slice(args);
    syncstore(&all)
}

fn json_on(url: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    run_on(url, &all).ok_json()
}

#[test]
fn inspection_works_on_a_streaming_hot_standby() {
    let mut pair = Pair::new();
    let primary_server = Pair::url(pair.primary_port);
    let schema = "app_data";
    client(&primary_server)
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .expect("create the schema on the primary");
    let db = Db::Postgres {
        server: primary_server.clone(),
        schema: schema.to_owned(),
    };
    let app = seed_todos(&db, "acme", 30, 10);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);

    pair.start_standby();
    let standby = format!("{}?schema={schema}", Pair::url(pair.standby_port));
    let primary = db.url();
    let in_recovery: bool = client(&Pair::url(pair.standby_port))
        .query_one("SELECT pg_is_in_recovery()", &[])
        .and_then(|row| row.try_get(0))
        .expect("ask the standby");
    assert!(in_recovery, "the standby is a hot standby");

    // Every inspection answers on the standby as on the primary.
    for args in [
        &["status"][..],
        &["status", "--partition", "acme"],
        &["checkpoints"],
        &["rows", "--partition", "acme", "--table", "todos"],
        &["commits", "--partition", "acme"],
    ] {
        assert_eq!(
            json_on(&standby, args),
            json_on(&primary, args),
            "{args:?} differs on the standby"
        );
        let text = run_on(&standby, args);
        assert_eq!(text.code, 0, "{args:?}: {}", text.stderr);
    }
    let status = json_on(&standby, &["status"]);
    assert_eq!(status["schema_version"], 2);
    assert_eq!(status["required_writer_version"], 2);
    let acme = &status["partitions"][0];
    assert_eq!(acme["max_commit_seq"], 3);
    assert_eq!(acme["writer_fence"], 2);
    assert_eq!(acme["checkpoints"][0]["state"], "declared");
    assert_eq!(acme["gate"]["serve"], false);

    // The standby follows: a prune on the primary is seen there.
    json_on(
        &primary,
        &["prune", "--partition", "acme", "--through", "1"],
    );
    let mut admin = client(&primary_server);
    barrier(&mut admin);
    assert_eq!(
        json_on(&standby, &["status"])["partitions"][0]["horizon_seq"],
        1
    );

    // `status` reads the fence trigger's state on the standby.
    admin
        .batch_execute(&format!(
            "ALTER TABLE {schema}.sync_commits DISABLE TRIGGER sync_commits_effective_writer_fence"
        ))
        .expect("disable the trigger on the primary");
    barrier(&mut admin);
    let details = run_on(&standby, &["status", "--json"]).json_error("sync.cli.fence_not_enforced");
    assert_eq!(details["cause"], "trigger_disabled");
    admin
        .batch_execute(&format!(
            "ALTER TABLE {schema}.sync_commits ENABLE TRIGGER sync_commits_effective_writer_fence"
        ))
        .expect("enable the trigger again");
    barrier(&mut admin);
    assert_eq!(json_on(&standby, &["status"])["schema_version"], 2);

    // Writing commands are refused there with a coded error.
    let v3 = write_file(&dir, "v3.json", &todos_schema(3, true, ""));
    let refused = run_on(
        &standby,
        &[
            "migrate",
            "--schema",
            &v3,
            "--carry",
            "acme:search_v2",
            "--json",
        ],
    );
    assert_eq!(refused.code, 1, "{}\n{}", refused.stdout, refused.stderr);
    let error = refused.json();
    assert_eq!(error["error"]["code"], "sync.storage.backend", "{error:#}");
    assert_eq!(error["error"]["details"]["cause"], "read_only", "{error:#}");
    let refused = run_on(
        &standby,
        &["prune", "--partition", "acme", "--through", "1", "--json"],
    );
    assert_eq!(refused.code, 1, "{}\n{}", refused.stdout, refused.stderr);
    assert_eq!(
        json_on(&primary, &["status"])["schema_version"],
        2,
        "nothing was migrated"
    );
    drop(app);
}
