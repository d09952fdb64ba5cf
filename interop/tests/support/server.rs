//! `syncstore serve` as a black box: a schema file and a tokens file are
//! written, the database is migrated with `syncstore migrate`, and the
//! server is spawned on a free loopback port. It is killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use super::binary::{run, run_json, syncstore_bin};
use super::db::{Db, Dialect};

/// How long a server may take to print its `listening on` line.
const STARTUP: Duration = Duration::from_secs(60);

/// A running `syncstore serve` over its own database.
#[derive(Debug)]
pub struct Server {
    /// `http://HOST:PORT`, as the server printed it.
    pub base_url: String,
    child: Option<Child>,
    db: Db,
    files: tempfile::TempDir,
    schema_file: PathBuf,
    tokens_file: PathBuf,
    log_file: PathBuf,
    extra_args: Vec<String>,
}

impl Server {
    /// Migrates a fresh database of `dialect` to `schema` and serves it
    /// with `tokens` (the `--tokens` file's JSON).
    pub fn start(dialect: Dialect, schema: &Value, tokens: &Value) -> Self {
        Self::start_with(dialect, schema, tokens, &[])
    }

    /// As [`Server::start`], with more `serve` arguments.
    pub fn start_with(dialect: Dialect, schema: &Value, tokens: &Value, args: &[&str]) -> Self {
        let db = Db::new(dialect);
        let files = tempfile::tempdir().expect("a temporary directory");
        let schema_file = files.path().join("schema.json");
        let tokens_file = files.path().join("tokens.json");
        let log_file = files.path().join("serve.log");
        let mut server = Self {
            base_url: String::new(),
            child: None,
            db,
            files,
            schema_file,
            tokens_file,
            log_file,
            extra_args: args.iter().map(|a| (*a).to_owned()).collect(),
        };
        server.migrate(schema);
        server.write_tokens(tokens);
        server.spawn();
        server
    }

    /// The `--db` URL of the server's database.
    pub fn db_url(&self) -> String {
        self.db.url()
    }

    /// Runs `syncstore --db <this database> --json args…` (the operator's
    /// door to the same storage the server uses).
    pub fn syncstore_json(&self, args: &[&str]) -> Value {
        run_json(&self.db.url(), args)
    }

    /// Writes `schema` and runs `syncstore migrate` to it.
    pub fn migrate(&self, schema: &Value) {
        std::fs::write(&self.schema_file, schema.to_string()).expect("write the schema file");
        let schema_file = self.schema_file.display().to_string();
        run_json(&self.db.url(), &["migrate", "--schema", &schema_file]);
    }

    /// Stops the server, then serves the same database again with `tokens`
    /// and the schema file as it is now.
    pub fn restart(&mut self, tokens: &Value) {
        self.stop();
        self.write_tokens(tokens);
        self.spawn();
    }

    fn write_tokens(&self, tokens: &Value) {
        std::fs::write(&self.tokens_file, tokens.to_string()).expect("write the tokens file");
    }

    fn spawn(&mut self) {
        let (child, base_url) = spawn_serve(
            &self.db.url(),
            &self.schema_file,
            &self.tokens_file,
            &self.extra_args,
            &self.log_file,
        );
        self.child = Some(child);
        self.base_url = base_url;
    }

    /// A second `syncstore serve` process on the same database (same schema
    /// and tokens files), as a load balancer's second backend; killed when
    /// dropped.
    pub fn peer(&self) -> Peer {
        let log_file = self.files.path().join(format!(
            "serve-peer-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let (child, base_url) = spawn_serve(
            &self.db.url(),
            &self.schema_file,
            &self.tokens_file,
            &self.extra_args,
            &log_file,
        );
        Peer {
            base_url,
            child: Some(child),
        }
    }

    /// What the server wrote on stderr so far.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// A scratch directory of this scenario.
    pub fn scratch(&self) -> &Path {
        self.files.path()
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Runs `syncstore --db <this database> args…` and returns its output.
    pub fn syncstore(&self, args: &[&str]) -> std::process::Output {
        run(&self.db.url(), args)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Another `serve` process of a [`Server`]'s database.
#[derive(Debug)]
pub struct Peer {
    /// `http://HOST:PORT`, as the process printed it.
    pub base_url: String,
    child: Option<Child>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn server_log(log_file: &Path) -> String {
    std::fs::read_to_string(log_file).unwrap_or_default()
}

/// Spawns `syncstore --db URL serve …` on a free loopback port and waits
/// for its `listening on` line.
fn spawn_serve(
    db_url: &str,
    schema_file: &Path,
    tokens_file: &Path,
    extra_args: &[String],
    log_file: &Path,
) -> (Child, String) {
    let log = std::fs::File::create(log_file).expect("create the server log");
    let mut child = Command::new(syncstore_bin())
        .arg("--db")
        .arg(db_url)
        .arg("serve")
        .arg("--schema")
        .arg(schema_file)
        .args(["--listen", "127.0.0.1:0"])
        .arg("--tokens")
        .arg(tokens_file)
        .args(extra_args)
        .env_remove("SYNCSTORE_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", syncstore_bin().display()));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok);
        let _ = tx.send(first);
        // Keep draining so the server never blocks on a full pipe.
        for _ in lines {}
    });
    let line = match rx.recv_timeout(STARTUP) {
        Ok(Some(line)) => line,
        Ok(None) => panic!(
            "syncstore serve exited before listening:\n{}",
            server_log(log_file)
        ),
        Err(_) => panic!(
            "syncstore serve printed nothing within {STARTUP:?}:\n{}",
            server_log(log_file)
        ),
    };
    let url = line
        .strip_prefix("listening on ")
        .filter(|url| url.starts_with("http://"))
        .unwrap_or_else(|| {
            panic!(
                "expected `listening on http://HOST:PORT`, got {line:?}:\n{}",
                server_log(log_file)
            )
        });
    (child, url.trim_end().to_owned())
}
