//! A throwaway MariaDB server of a test's own, which it may stop, crash
//! and start again — never the shared test server. Its data directory is
//! made by `mariadb-install-db` in a temporary directory (root without a
//! password), it listens on a free port of 127.0.0.1 and on a socket in
//! that directory, and writes its log to its standard error, which a
//! thread reads: the server is up when it logs `ready for connections`
//! (no polling), and down when its log ends and the process is reaped.
//! Dropping the value kills a running server and removes the directory.
//!
//! Needs `mariadb-install-db` and `mariadbd` (on `PATH` or in the usual
//! system directories); [`ThrowawayServer::start`] says why when it cannot
//! start one.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

/// The database created on the server for the tests.
pub const DATABASE: &str = "test";

/// How long a start or a shutdown may take before it counts as failed.
const PATIENCE: Duration = Duration::from_secs(120);

/// The line the server logs once it accepts connections.
const READY: &str = "ready for connections";

/// A running (or stopped) throwaway server.
#[derive(Debug)]
pub struct ThrowawayServer {
    dir: tempfile::TempDir,
    server: PathBuf,
    user: String,
    port: u16,
    running: Option<Running>,
}

/// The server process and its log.
#[derive(Debug)]
struct Running {
    child: Child,
    /// Lines of its standard error, as the reader thread reads them; the
    /// channel disconnects when the log ends (the process exited).
    log: mpsc::Receiver<String>,
}

impl ThrowawayServer {
    /// Installs a data directory, starts the server on a free port and
    /// creates [`DATABASE`]; or why not (a missing program, an install or
    /// a start that failed, with the tail of its output).
    pub fn start() -> Result<Self, String> {
        let install = find_program("mariadb-install-db", &["/usr/bin", "/usr/local/bin"])?;
        let server = find_program(
            "mariadbd",
            &["/usr/sbin", "/usr/local/sbin", "/usr/libexec"],
        )?;
        let user = run("id", &["-un"])?.trim().to_owned();
        let dir = tempfile::Builder::new()
            .prefix("syncstore-mariadb-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let data = dir.path().join("data");
        // A server of its own temporary directory: at start (and when
        // installing) a MariaDB server deletes every `#sql*` file of its
        // temporary directory, which in the default `/tmp` are the live
        // internal temporary tables of any other server on the machine.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).map_err(|e| format!("temporary directory: {e}"))?;
        run(
            &install.to_string_lossy(),
            &[
                "--no-defaults",
                &format!("--datadir={}", data.display()),
                &format!("--tmpdir={}", tmp.display()),
                &format!("--user={user}"),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
        )?;
        let port = free_port()?;
        let mut this = Self {
            dir,
            server,
            user,
            port,
            running: None,
        };
        this.start_again()?;
        let mut conn = this.connect(None)?;
        conn.query_drop(format!(
            "CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
        ))
        .map_err(|e| format!("create the test database: {e}"))?;
        Ok(this)
    }

    /// The URL of [`DATABASE`] on the server.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// Whether the server process runs.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Starts the stopped server on its data directory and port; returns
    /// the moment it logged that it accepts connections.
    pub fn start_again(&mut self) -> Result<Instant, String> {
        if self.running.is_some() {
            return Err("the server is already running".into());
        }
        let data = self.dir.path().join("data");
        let mut child = Command::new(&self.server)
            .args([
                "--no-defaults".to_owned(),
                format!("--datadir={}", data.display()),
                format!("--tmpdir={}", self.dir.path().join("tmp").display()),
                format!("--port={}", self.port),
                format!("--socket={}", self.dir.path().join("sock").display()),
                format!("--pid-file={}", self.dir.path().join("pid").display()),
                "--bind-address=127.0.0.1".to_owned(),
                format!("--user={}", self.user),
                "--innodb-buffer-pool-size=64M".to_owned(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{} is not available ({e})", self.server.display()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or("the server's standard error is not piped")?;
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            // Reads to the end whether or not anyone listens: a full pipe
            // would stop the server.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut running = Running { child, log };
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match running.log.recv_timeout(left) {
                Ok(line) if line.contains(READY) => break,
                Ok(line) => seen.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = running.child.wait().map(|s| s.to_string());
                    return Err(format!(
                        "{} exited before accepting connections ({status:?}): {}",
                        self.server.display(),
                        tail(&seen)
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = running.child.kill();
                    let _ = running.child.wait();
                    return Err(format!(
                        "{} did not accept connections within {PATIENCE:?}: {}",
                        self.server.display(),
                        tail(&seen)
                    ));
                }
            }
        }
        let ready = Instant::now();
        self.running = Some(running);
        Ok(ready)
    }

    /// Stops the server cleanly (`SHUTDOWN`) and returns once its process
    /// has exited.
    pub fn shutdown(&mut self) -> Result<(), String> {
        let mut running = self.running.take().ok_or("the server is not running")?;
        let mut conn = match self.connect(None) {
            Ok(conn) => conn,
            Err(e) => {
                let _ = running.child.kill();
                let _ = running.child.wait();
                return Err(format!("shutdown: {e}"));
            }
        };
        // The server may close the connection before it answers.
        let _ = conn.query_drop("SHUTDOWN");
        drop(conn);
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match running.log.recv_timeout(left) {
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = running.child.kill();
                    let _ = running.child.wait();
                    return Err(format!("the server did not shut down within {PATIENCE:?}"));
                }
            }
        }
        let status = running
            .child
            .wait()
            .map_err(|e| format!("reap the server: {e}"))?;
        if !status.success() {
            return Err(format!("the server's shutdown ended with {status}"));
        }
        Ok(())
    }

    /// Kills the server (`SIGKILL`: a crash, InnoDB recovers at the next
    /// start) and returns once its process is reaped.
    pub fn crash(&mut self) -> Result<(), String> {
        let mut running = self.running.take().ok_or("the server is not running")?;
        running
            .child
            .kill()
            .map_err(|e| format!("kill the server: {e}"))?;
        running
            .child
            .wait()
            .map_err(|e| format!("reap the server: {e}"))?;
        Ok(())
    }

    /// A plain connection as root, to `database` or to none.
    pub fn connect(&self, database: Option<&str>) -> Result<mysql::Conn, String> {
        let opts = mysql::OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(self.port)
            .user(Some("root"))
            .db_name(database)
            .prefer_socket(false);
        mysql::Conn::new(opts).map_err(|e| format!("connect to the throwaway server: {e}"))
    }
}

impl Drop for ThrowawayServer {
    fn drop(&mut self) {
        if let Some(mut running) = self.running.take() {
            let _ = running.child.kill();
            let _ = running.child.wait();
        }
        // The temporary directory (data, socket) goes with `self.dir`.
    }
}

/// `name` on `PATH`, else in one of `dirs`.
fn find_program(name: &str, dirs: &[&str]) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(dirs.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("{name} is not installed (looked on PATH and in {dirs:?})"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A port of 127.0.0.1 nobody listens on (the moment it is asked).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Runs a program to its end; its standard output, or why it failed.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program} is not available ({e})"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            output.status,
            tail(
                &String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .chain(String::from_utf8_lossy(&output.stdout).lines())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            )
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The last lines of a log, for an error message.
fn tail(lines: &[String]) -> String {
    let start = lines.len().saturating_sub(8);
    lines[start..].join(" | ")
}
