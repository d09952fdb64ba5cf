//! The command line as clap types. Parsing only: every command's behaviour
//! lives in `commands/`.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

/// `syncstore`: migrate, inspect and repair a sync database.
#[derive(Debug, Parser)]
#[command(
    name = "syncstore",
    version,
    about = "Operate a syncstore database: migrate, inspect, backfill, prune — and a demo of the whole story.",
    after_help = "Exit status: 0 success, 1 refused or failed operation (stderr `error: <code>: <message>`, \
                  or a JSON error document on stdout with --json), 2 usage error."
)]
pub struct Cli {
    /// Database URL: `sqlite:PATH`, `postgres://…[?schema=NAME]` or
    /// `mariadb://user@host[:port]/DATABASE` (also `mysql://…`).
    /// Default: $SYNCSTORE_DATABASE_URL, else `sqlite:syncstore.db`
    /// (the demo defaults to a new SQLite file in a temporary directory).
    #[arg(long, global = true, value_name = "URL")]
    pub db: Option<String>,

    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// More logs on stderr (`-v` info, `-vv` debug); `SYNCSTORE_LOG` sets a filter.
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bring the database to the schema file's version (or verify it is there).
    Migrate(MigrateArgs),
    /// Schema version, fences, tables and, per partition, log, gate and checkpoints.
    Status(PartitionFilter),
    /// The RFC 0007 checkpoint rows.
    Checkpoints(PartitionFilter),
    /// Run the checkpoint runner for one partition until the checkpoint activates.
    Backfill(BackfillArgs),
    /// Delete commit history through a sequence number (epoch-fenced).
    Prune(PruneArgs),
    /// Distribute a fresh Postgres schema by partition on a Citus coordinator (docs/scale-out.md).
    Distribute(DistributeArgs),
    /// Current rows of one table, decoded.
    Rows(RowsArgs),
    /// Retained commits with every change, decoded.
    Commits(CommitsArgs),
    /// Tell and show the whole story on a fresh database.
    Demo(DemoArgs),
    /// Run one sync round (push and pull) from a JSON-lines request.
    Sync(SyncArgs),
    /// Serve the sync protocol (SSP2) over HTTP until SIGTERM or SIGINT.
    Serve(ServeArgs),
    /// Every error code this command can print, with its message.
    Errors(ErrorsArgs),
    /// Decode an SSP2 message or SSG2 segment file: render it or re-encode it.
    #[command(subcommand)]
    Ssp2(Ssp2Command),
}

/// `ssp2`: the wire codec on a file, for debugging and cross-checks.
#[derive(Debug, Subcommand)]
pub enum Ssp2Command {
    /// Print the debug JSON rendering of the file (exit 0), or
    /// `{"error": {...}}` when it does not decode (exit 1).
    Render(Ssp2FileArgs),
    /// Decode the file and write its encoding on stdout (exit 0), or
    /// `{"error": {...}}` when it does not decode (exit 1).
    Reencode(Ssp2FileArgs),
}

/// The file of an `ssp2` command.
#[derive(Debug, Args)]
pub struct Ssp2FileArgs {
    /// What the file holds.
    #[arg(long, value_enum)]
    pub kind: Ssp2Kind,

    /// The file; `-` reads stdin.
    #[arg(value_name = "FILE")]
    pub file: String,
}

/// What an `ssp2` file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Ssp2Kind {
    /// An SSP2 request message.
    Request,
    /// An SSP2 response message.
    Response,
    /// An SSG2 rows segment.
    Segment,
}

/// `distribute`.
#[derive(Debug, Args)]
pub struct DistributeArgs {
    /// Shards of the colocation group (default: the server's `citus.shard_count`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64000))]
    pub shard_count: Option<u32>,
}

/// `errors`.
#[derive(Debug, Args)]
pub struct ErrorsArgs {
    /// Print the Markdown table of `docs/operations.md`.
    #[arg(long)]
    pub markdown: bool,
}

/// `migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Schema file (JSON: `{"version": N, "tables": [...]}`; see docs/operations.md).
    #[arg(long, value_name = "FILE")]
    pub schema: PathBuf,

    /// Declare a backfill checkpoint `NAME` for `PARTITION` (repeatable). The
    /// partition is everything before the last `:`.
    #[arg(long = "declare", value_name = "PARTITION:NAME", value_parser = parse_declaration)]
    pub declare: Vec<Declaration>,

    /// `--declare` may name a partition the database does not know yet
    /// (no registry entry, no commits, no checkpoint). Without it such a
    /// declaration is refused: a typo would close a gate.
    #[arg(long)]
    pub new_partition: bool,

    /// A bump past an unfinished checkpoint of an older version moves it to
    /// the new version (progress reset; backfill it with the new schema)
    /// (repeatable).
    #[arg(long = "carry", value_name = "PARTITION:NAME", value_parser = parse_declaration)]
    pub carry: Vec<Declaration>,

    /// A bump past an unfinished checkpoint of an older version deletes it
    /// (its projection is given up) (repeatable).
    #[arg(long = "abandon", value_name = "PARTITION:NAME", value_parser = parse_declaration)]
    pub abandon: Vec<Declaration>,

    /// A bump may retire (drop) table `TABLE` although it holds rows
    /// (repeatable). A table in the stored layouts and missing from the
    /// schema file is retired with its rows; without this a table holding
    /// rows is refused: a rename typo would drop them.
    #[arg(long = "retire", value_name = "TABLE")]
    pub retire: Vec<String>,

    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A `--declare PARTITION:NAME` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    /// Partition.
    pub partition: String,
    /// Checkpoint name.
    pub name: String,
}

fn parse_declaration(text: &str) -> Result<Declaration, String> {
    match text.rsplit_once(':') {
        Some((partition, name)) if !partition.is_empty() && !name.is_empty() => Ok(Declaration {
            partition: partition.to_owned(),
            name: name.to_owned(),
        }),
        _ => Err("expected PARTITION:NAME with both parts non-empty".to_owned()),
    }
}

/// `--partition` filter of `status` and `checkpoints`.
#[derive(Debug, Args)]
pub struct PartitionFilter {
    /// Only this partition.
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
}

/// The ready projectors `backfill` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProjectorKind {
    /// A nullable column of a table derived from another column of the same row.
    DerivedColumn,
    /// A table with one row per source row, its columns mapped from the source's.
    DerivedTable,
}

/// How a derived value is computed from its source value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transform {
    /// The source value unchanged.
    Copy,
    /// Strings lower-cased (Unicode); other values unchanged.
    Lower,
    /// Strings upper-cased (Unicode); other values unchanged.
    Upper,
    /// Strings without leading and trailing whitespace; other values unchanged.
    Trim,
}

/// `backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// Partition to backfill.
    #[arg(long, value_name = "P")]
    pub partition: String,

    /// Checkpoint name.
    #[arg(long, value_name = "N")]
    pub name: String,

    /// Schema file of the database's current version (the code the backfill runs as).
    #[arg(long, value_name = "FILE")]
    pub schema: PathBuf,

    /// Projector kind.
    #[arg(long, value_enum, value_name = "KIND")]
    pub projector: ProjectorKind,

    /// derived-column: the table holding the derived column.
    #[arg(long, value_name = "T", required_if_eq("projector", "derived-column"))]
    pub table: Option<String>,

    /// derived-column: the derived (nullable) column.
    #[arg(long, value_name = "C", required_if_eq("projector", "derived-column"))]
    pub column: Option<String>,

    /// derived-column: the column it is derived from.
    #[arg(
        long = "from",
        value_name = "SOURCE_COLUMN",
        required_if_eq("projector", "derived-column")
    )]
    pub from: Option<String>,

    /// derived-column: how the value is derived.
    #[arg(long, value_enum, default_value = "copy")]
    pub transform: Transform,

    /// derived-table: the source table.
    #[arg(long, value_name = "T", required_if_eq("projector", "derived-table"))]
    pub source: Option<String>,

    /// derived-table: the projection table (one row per source row, same row id and scopes).
    #[arg(long, value_name = "T2", required_if_eq("projector", "derived-table"))]
    pub target: Option<String>,

    /// derived-table: `TARGET_COLUMN=SOURCE_COLUMN[:TRANSFORM]` (repeatable).
    /// Unmapped target columns copy the source column of the same name, else are NULL.
    #[arg(long = "map", value_name = "TARGET=SOURCE[:TRANSFORM]", value_parser = parse_mapping)]
    pub map: Vec<ColumnMapping>,

    /// Source rows per transaction (1..=1000).
    #[arg(long, default_value_t = 500, allow_negative_numbers = true)]
    pub batch_size: i64,

    /// Full passes plus retries after `busy` before giving up (at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_attempts: u32,

    /// `--name` may be a checkpoint the partition has not declared yet: the
    /// backfill declares it (raising the partition's writer fence). Without
    /// it an undeclared name is refused: a typo would close the partition.
    #[arg(long)]
    pub declare_new: bool,
}

impl BackfillArgs {
    /// Options of the other projector kind are a usage error.
    pub fn check_kind_options(&self) -> Result<(), String> {
        let foreign: &[(&str, bool)] = match self.projector {
            ProjectorKind::DerivedColumn => &[
                ("--source", self.source.is_some()),
                ("--target", self.target.is_some()),
                ("--map", !self.map.is_empty()),
            ],
            ProjectorKind::DerivedTable => &[
                ("--table", self.table.is_some()),
                ("--column", self.column.is_some()),
                ("--from", self.from.is_some()),
            ],
        };
        match foreign.iter().find(|(_, given)| *given) {
            Some((option, _)) => Err(format!(
                "{option} does not apply to --projector {}",
                self.projector
                    .to_possible_value()
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default()
            )),
            None => Ok(()),
        }
    }
}

/// A `--map TARGET=SOURCE[:TRANSFORM]` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMapping {
    /// Target column.
    pub target: String,
    /// Source column.
    pub source: String,
    /// Transform.
    pub transform: Transform,
}

fn parse_mapping(text: &str) -> Result<ColumnMapping, String> {
    let (target, rest) = text
        .split_once('=')
        .ok_or_else(|| "expected TARGET=SOURCE[:TRANSFORM]".to_owned())?;
    let (source, transform) = match rest.split_once(':') {
        Some((source, transform)) => (source, Transform::from_str(transform, true)?),
        None => (rest, Transform::Copy),
    };
    if target.is_empty() || source.is_empty() {
        return Err("expected TARGET=SOURCE[:TRANSFORM] with non-empty columns".to_owned());
    }
    Ok(ColumnMapping {
        target: target.to_owned(),
        source: source.to_owned(),
        transform,
    })
}

/// `prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Partition.
    #[arg(long, value_name = "P")]
    pub partition: String,

    /// Delete commits with `commit_seq <= SEQ` (the horizon never goes back).
    #[arg(long, value_name = "SEQ", allow_negative_numbers = true)]
    pub through: i64,
}

/// `rows`.
#[derive(Debug, Args)]
pub struct RowsArgs {
    /// Partition.
    #[arg(long, value_name = "P")]
    pub partition: String,

    /// Table (as named in the stored layouts).
    #[arg(long, value_name = "T")]
    pub table: String,

    /// Resume after this row id (the previous page's `next`).
    #[arg(long, value_name = "ROW_ID")]
    pub after: Option<String>,

    /// Rows per page (1..=1000).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
    pub limit: i64,
}

/// `commits`.
#[derive(Debug, Args)]
pub struct CommitsArgs {
    /// Partition.
    #[arg(long, value_name = "P")]
    pub partition: String,

    /// Resume after this commit sequence number (the previous page's `next`).
    #[arg(
        long,
        value_name = "SEQ",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub after: i64,

    /// Commits per page (1..=1000).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
    pub limit: i64,
}

/// `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Rows the v1 fleet pushes.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rows: u32,

    /// On a Citus coordinator: distribute the fresh tables by partition
    /// before the first write (as `distribute` does; see docs/scale-out.md).
    #[arg(long)]
    pub distribute: bool,

    /// Shards with `--distribute` (default: the server's `citus.shard_count`).
    #[arg(long, value_name = "N", requires = "distribute",
          value_parser = clap::value_parser!(u32).range(1..=64000))]
    pub shard_count: Option<u32>,
}

/// `sync`.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// Schema file; the database must already be at its version.
    #[arg(long, value_name = "FILE")]
    pub schema: PathBuf,

    /// Partition of the request (what authentication would set).
    #[arg(long, value_name = "P")]
    pub partition: String,

    /// Actor of the request (what authentication would set).
    #[arg(long, value_name = "A")]
    pub actor: String,

    /// An allowed scope `KEY=V1,V2` of the actor (repeatable); `KEY=*`
    /// allows any value. Without `--allow` nothing is allowed.
    #[arg(long = "allow", value_name = "KEY=V1,V2", value_parser = parse_allow)]
    pub allow: Vec<AllowedScope>,

    /// Declare a backfill checkpoint `PARTITION:NAME` as this process
    /// (repeatable), as a server started with that declaration would.
    #[arg(long = "declare", value_name = "P:NAME", value_parser = parse_declaration)]
    pub declare: Vec<Declaration>,

    /// The request as JSON lines; `-` (the default) reads stdin.
    #[arg(long, value_name = "FILE|-", default_value = "-")]
    pub request: String,

    /// Write rows and `serverRow` as base64 row-codec bytes instead of
    /// decoded JSON objects.
    #[arg(long)]
    pub raw_bytes: bool,

    /// The largest request read, in bytes (line terminators included); a
    /// longer one is refused before more is read.
    #[arg(long, value_name = "BYTES", default_value_t = crate::commands::sync::DEFAULT_MAX_REQUEST_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_request_bytes: u64,

    /// The longest request line read, in bytes (one frame; a `PUSH_COMMIT`
    /// carries its operations on its line); a longer one is refused before
    /// more of it is read.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = crate::commands::sync::DEFAULT_MAX_LINE_BYTES as u64,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_line_bytes: u64,
}

/// `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Schema file; the database must already be at its version. Optional
    /// with `--test-control` (then the database itself is not served).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "test_control",
        requires = "tokens"
    )]
    pub schema: Option<PathBuf>,

    /// Address to listen on, `HOST:PORT` (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,

    /// The bearer tokens: a JSON object `{"<token>": {"partition": "p",
    /// "actor": "a", "allow": {"<scope key>": ["v1", "*"]}}}`.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "test_control",
        requires = "schema"
    )]
    pub tokens: Option<PathBuf>,

    /// Also serve the test control routes under `/test/instances`:
    /// isolated instances with a virtual clock, scope and fault switches,
    /// each in a fresh storage of `--db`'s dialect. Refused unless
    /// `--listen` is a loopback address.
    #[arg(long)]
    pub test_control: bool,

    /// Test control instances open at once (with `--test-control`).
    #[arg(long, value_name = "N", default_value_t = 16, requires = "test_control", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_instances: u16,

    /// Declare a backfill checkpoint `PARTITION:NAME` as this process
    /// (repeatable).
    #[arg(long = "declare", value_name = "P:NAME", value_parser = parse_declaration)]
    pub declare: Vec<Declaration>,

    /// Sync rounds and segment downloads running at once (default 8: no
    /// more than the smallest built-in connection pool).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_rounds: u16,

    /// Realtime sockets this process holds at most (`GET /realtime`).
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub realtime_max_sockets: u32,

    /// Realtime sockets per actor and partition.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub realtime_max_sockets_per_actor: u32,

    /// Deltas a socket is sent without an ack before it gets a
    /// `catchup-required` wake-up instead.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub realtime_max_unacked: u32,

    /// Seconds between realtime heartbeats.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub realtime_heartbeat_secs: u64,
}

/// An `--allow KEY=V1,V2` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedScope {
    /// Scope variable.
    pub key: String,
    /// Allowed values (`*` = any).
    pub values: Vec<String>,
}

fn parse_allow(text: &str) -> Result<AllowedScope, String> {
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| "expected KEY=V1,V2 (or KEY=*)".to_owned())?;
    let values: Vec<String> = values.split(',').map(str::to_owned).collect();
    if key.is_empty() || values.iter().any(String::is_empty) {
        return Err("expected KEY=V1,V2 with a non-empty key and non-empty values".to_owned());
    }
    Ok(AllowedScope {
        key: key.to_owned(),
        values,
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn declarations_split_at_the_last_colon() {
        assert_eq!(
            parse_declaration("org:acme:search_v2").unwrap(),
            Declaration {
                partition: "org:acme".into(),
                name: "search_v2".into()
            }
        );
        assert!(parse_declaration("acme").is_err());
        assert!(parse_declaration(":x").is_err());
        assert!(parse_declaration("x:").is_err());
    }

    #[test]
    fn allowed_scopes_split_key_and_values() {
        assert_eq!(
            parse_allow("list=l1,l2").unwrap(),
            AllowedScope {
                key: "list".into(),
                values: vec!["l1".into(), "l2".into()]
            }
        );
        assert_eq!(parse_allow("list=*").unwrap().values, ["*"]);
        assert!(parse_allow("list").is_err());
        assert!(parse_allow("=l1").is_err());
        assert!(parse_allow("list=").is_err());
        assert!(parse_allow("list=a,,b").is_err());
    }

    #[test]
    fn mappings_name_target_source_and_transform() {
        assert_eq!(
            parse_mapping("terms=title:lower").unwrap(),
            ColumnMapping {
                target: "terms".into(),
                source: "title".into(),
                transform: Transform::Lower
            }
        );
        assert_eq!(parse_mapping("id=id").unwrap().transform, Transform::Copy);
        assert!(parse_mapping("terms").is_err());
        assert!(parse_mapping("terms=title:shout").is_err());
    }
}
