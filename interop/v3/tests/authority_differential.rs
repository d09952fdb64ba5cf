//! The differential test of design §8.5: proptest-generated sequences of
//! version 3 requests over one small table, each sent to the reference's
//! in-process server of the same release (`syncular-authority` 0.49.2, on
//! a scratch SQLite database) and to `syncstore serve`, compared step by
//! step. The frames after the request header are the same bytes on both
//! sides; the header differs only in the log epoch each server issued.
//!
//! Differences that are deliberate decisions are folded, each naming its
//! decision (`docs/decisions.md`): a negative `baseVersion` (D8) and what
//! follows a key-only update (D3). Any other difference fails the test.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};
use ssp2_v3::model::{Frame, Message, MsgKind, Op, OpResult, Operation, PushStatus, SubStatus};
use ssp2_v3::segment::{Column, ColumnType, ColumnValue, SparseSlot};
use support::{Dialect, Server};

/// The SSP2 media type (every wire version).
const SSP2: &str = "application/vnd.syncular.sync.v2";
/// The table of every request.
const TABLE: &str = "items";
/// The schema version of every request.
const SCHEMA_VERSION: i32 = 1;
/// Row ids the sequences draw from.
const ROW_IDS: [&str; 3] = ["r0", "r1", "r2"];
/// Scope values the sequences draw from.
const GROUPS: [&str; 2] = ["g1", "g2"];
/// Proptest cases per dialect.
const CASES: u32 = 128;
/// Partitions (one per proptest case, shrinking included) the tokens
/// file provides.
const PARTITIONS: usize = 1024;
/// The client of every case (each case has a partition of its own).
const CLIENT: &str = "device-1";

/// `items(id, grp, a, b, c)` scoped by `g:{grp}`: a nullable string, a
/// required integer and a nullable boolean beside the key and the scope.
fn schema() -> Value {
    json!({
        "version": SCHEMA_VERSION,
        "tables": [{
            "name": TABLE,
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string", "nullable": false},
                {"name": "grp", "type": "string", "nullable": false},
                {"name": "a", "type": "string", "nullable": true},
                {"name": "b", "type": "integer", "nullable": false},
                {"name": "c", "type": "boolean", "nullable": true},
            ],
            "scopes": [{"pattern": "g:{grp}", "column": "grp"}],
        }]
    })
}

/// The table's columns as the codec reads them, in declaration order.
fn columns() -> Vec<Column> {
    let column = |name: &str, ty, nullable| Column {
        name: name.to_owned(),
        ty,
        nullable,
    };
    vec![
        column("id", ColumnType::String, false),
        column("grp", ColumnType::String, false),
        column("a", ColumnType::String, true),
        column("b", ColumnType::Integer, false),
        column("c", ColumnType::Boolean, true),
    ]
}

/// One token per partition, each granting `*` on the scope variable (the
/// authority serves its one local actor every scope value).
fn tokens() -> Value {
    let entries = (0..PARTITIONS).map(|k| {
        (
            token(k),
            json!({"partition": format!("p{k}"), "actor": "local", "allow": {"grp": ["*"]}}),
        )
    });
    Value::Object(entries.collect())
}

fn token(partition: usize) -> String {
    format!("token-{partition}")
}

// ---------------------------------------------------------------------------
// What proptest generates

/// The `baseVersion` of an operation, resolved against the row's version
/// on the authority just before the step.
#[derive(Debug, Clone, Copy)]
enum Base {
    Absent,
    Current,
    Stale,
    Zero,
    TooHigh,
    Negative,
}

/// One column of a sparse row.
#[derive(Debug, Clone)]
enum Slot<T> {
    Absent,
    Null,
    Value(T),
}

/// Which columns an upsert presents.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Every column.
    Whole,
    /// Each column present or absent as drawn.
    Sparse,
    /// The key only.
    KeyOnly,
}

/// One generated operation.
#[derive(Debug, Clone)]
struct GenOp {
    row: usize,
    delete: bool,
    base: Base,
    grp: Slot<usize>,
    a: Slot<String>,
    b: Slot<i64>,
    c: Slot<bool>,
}

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    /// A new commit of these operations.
    Commit(Vec<GenOp>),
    /// The earlier commit with this index (modulo the commits so far)
    /// sent again, same id, same operations.
    Replay(usize),
}

fn base() -> impl Strategy<Value = Base> {
    prop_oneof![
        3 => Just(Base::Absent),
        5 => Just(Base::Current),
        3 => Just(Base::Stale),
        1 => Just(Base::Zero),
        1 => Just(Base::TooHigh),
        1 => Just(Base::Negative),
    ]
}

/// A slot: absent, null (when `nullable`; the reference codec cannot
/// encode a null in a required column) or a value.
fn slot<T: Clone + std::fmt::Debug + 'static>(
    values: impl Strategy<Value = T> + 'static,
    nullable: bool,
) -> BoxedStrategy<Slot<T>> {
    let values = values.prop_map(Slot::Value);
    if nullable {
        prop_oneof![2 => Just(Slot::Absent), 1 => Just(Slot::Null), 5 => values].boxed()
    } else {
        prop_oneof![2 => Just(Slot::Absent), 5 => values].boxed()
    }
}

fn full<T>(slot: Slot<T>, fallback: T) -> Slot<T> {
    match slot {
        Slot::Absent => Slot::Value(fallback),
        other => other,
    }
}

fn operation() -> impl Strategy<Value = GenOp> {
    let grp = prop_oneof![
        1 => Just(Slot::Absent),
        6 => Just(Slot::Value(0)),
        1 => Just(Slot::Value(1)),
    ];
    (
        0..ROW_IDS.len(),
        prop::bool::weighted(0.15),
        base(),
        prop_oneof![7 => Just(Shape::Whole), 10 => Just(Shape::Sparse), 3 => Just(Shape::KeyOnly)],
        grp,
        slot(
            prop::sample::select(vec!["x", "y", "z"]).prop_map(str::to_owned),
            true,
        ),
        slot(0i64..3, false),
        slot(any::<bool>(), true),
    )
        .prop_map(|(row, delete, base, shape, grp, a, b, c)| {
            let (grp, a, b, c) = match shape {
                Shape::Whole => (
                    full(grp, 0),
                    full(a, "x".to_owned()),
                    full(b, 0),
                    full(c, false),
                ),
                Shape::Sparse => (grp, a, b, c),
                Shape::KeyOnly => (Slot::Absent, Slot::Absent, Slot::Absent, Slot::Absent),
            };
            GenOp {
                row,
                delete,
                base,
                grp,
                a,
                b,
                c,
            }
        })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop::collection::vec(operation(), 1..=3).prop_map(Step::Commit),
        1 => any::<usize>().prop_map(Step::Replay),
    ]
}

fn sequence() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 1..=12)
}

// ---------------------------------------------------------------------------
// The two servers behind one interface

/// A server of version 3 rounds: frames in (after the header it adds),
/// the decoded response out, or the code of a refused request.
trait V3Server {
    /// One round of `frames` under `log_epoch`.
    fn round(&mut self, log_epoch: Option<&str>, frames: Vec<Frame>) -> Result<Message, String>;
}

fn request(log_epoch: Option<&str>, frames: Vec<Frame>) -> Vec<u8> {
    let mut all = vec![Frame::ReqHeader {
        client_id: CLIENT.to_owned(),
        schema_version: SCHEMA_VERSION,
        log_epoch: log_epoch.map(str::to_owned),
    }];
    all.extend(frames);
    ssp2_v3::encode_message(&Message {
        wire_version: 3,
        msg_kind: MsgKind::Request,
        frames: all,
    })
}

fn decode(body: &[u8]) -> Message {
    let message = ssp2_v3::decode_message(body)
        .unwrap_or_else(|e| panic!("the reference codec refused a response: {e:?}"));
    assert_eq!(message.wire_version, 3, "the response's wire version");
    message
}

/// The reference's in-process server.
struct Authority(authority::LocalAuthority);

impl V3Server for Authority {
    fn round(&mut self, log_epoch: Option<&str>, frames: Vec<Frame>) -> Result<Message, String> {
        self.0
            .sync(&request(log_epoch, frames))
            .map(|body| decode(&body))
            .map_err(|e| e.code)
    }
}

/// `syncstore serve`, one partition of it.
struct Ours<'a> {
    base_url: &'a str,
    token: String,
    agent: ureq::Agent,
}

impl V3Server for Ours<'_> {
    fn round(&mut self, log_epoch: Option<&str>, frames: Vec<Frame>) -> Result<Message, String> {
        let mut response = self
            .agent
            .post(format!("{}/sync", self.base_url))
            .header("content-type", SSP2)
            .header("authorization", format!("Bearer {}", self.token))
            .send(&request(log_epoch, frames)[..])
            .unwrap_or_else(|e| panic!("the HTTP request failed: {e}"));
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .read_to_vec()
            .unwrap_or_else(|e| panic!("reading the body failed: {e}"));
        if status == 200 {
            return Ok(decode(&body));
        }
        // A refused request: the code of its ERROR frame (or its body).
        let code = ssp2_v3::decode_message(&body)
            .ok()
            .and_then(|m| {
                m.frames.into_iter().find_map(|f| match f {
                    Frame::Error { code, .. } => Some(code),
                    _ => None,
                })
            })
            .unwrap_or_else(|| format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
        Err(code)
    }
}

/// The log epoch a server issues on a pull-only round (each server pushes
/// only under the epoch it issued).
fn log_epoch(server: &mut dyn V3Server) -> String {
    let pull = Frame::PullHeader {
        limit_commits: 0,
        limit_snapshot_rows: 0,
        max_snapshot_pages: 0,
        accept: 1,
    };
    server
        .round(None, vec![pull])
        .unwrap_or_else(|code| panic!("the epoch round was refused: {code}"))
        .frames
        .into_iter()
        .find_map(|frame| match frame {
            Frame::RespHeader { log_epoch, .. } => log_epoch,
            _ => None,
        })
        .unwrap_or_else(|| panic!("no log epoch in the response"))
}

// ---------------------------------------------------------------------------
// What is compared

/// A decoded row: column name → value.
type Row = BTreeMap<String, Value>;

fn json_of(value: Option<ColumnValue>) -> Value {
    match value {
        None => Value::Null,
        Some(ColumnValue::String(s)) => Value::String(s),
        Some(ColumnValue::Integer(i)) => Value::from(i),
        Some(ColumnValue::Boolean(b)) => Value::Bool(b),
        Some(other) => panic!("unexpected value {other:?}"),
    }
}

fn named(values: Vec<Option<ColumnValue>>) -> Row {
    columns()
        .iter()
        .zip(values)
        .map(|(column, value)| (column.name.clone(), json_of(value)))
        .collect()
}

fn decode_server_row(bytes: &[u8]) -> Row {
    let mut reader = ssp2_v3::primitives::Reader::new(bytes);
    let values = ssp2_v3::segment::decode_row(&mut reader, &columns())
        .unwrap_or_else(|e| panic!("serverRow does not decode: {e:?}"));
    named(values)
}

/// One operation's result, as compared.
#[derive(Debug, Clone, PartialEq)]
enum OpOutcome {
    Applied,
    Conflict {
        code: String,
        server_version: i64,
        server_row: Row,
        conflict_columns: Vec<u8>,
    },
    Error {
        code: String,
        retryable: bool,
    },
}

/// One push's outcome, as compared.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// The request was refused, or answered with an ERROR frame.
    Refused(String),
    /// Its `PUSH_RESULT`.
    Pushed {
        status: PushStatus,
        has_commit_seq: bool,
        /// By operation index (a rejected commit reports its terminal
        /// operation only).
        results: BTreeMap<i32, OpOutcome>,
    },
}

fn result_of(result: OpResult) -> (i32, OpOutcome) {
    match result {
        OpResult::Applied { op_index } => (op_index, OpOutcome::Applied),
        OpResult::Conflict {
            op_index,
            code,
            server_version,
            server_row,
            conflict_columns,
            ..
        } => (
            op_index,
            OpOutcome::Conflict {
                code,
                server_version,
                server_row: decode_server_row(&server_row),
                conflict_columns,
            },
        ),
        OpResult::Error {
            op_index,
            code,
            retryable,
            ..
        } => (op_index, OpOutcome::Error { code, retryable }),
    }
}

fn push(server: &mut dyn V3Server, epoch: &str, commit: &Frame) -> Outcome {
    let response = match server.round(Some(epoch), vec![commit.clone()]) {
        Ok(response) => response,
        Err(code) => return Outcome::Refused(code),
    };
    for frame in response.frames {
        match frame {
            Frame::PushResult {
                status,
                commit_seq,
                results,
                ..
            } => {
                return Outcome::Pushed {
                    status,
                    has_commit_seq: commit_seq.is_some(),
                    results: results.into_iter().map(result_of).collect(),
                };
            }
            Frame::Error { code, .. } => return Outcome::Refused(code),
            _ => {}
        }
    }
    panic!("no PUSH_RESULT in the response")
}

/// The rows (id → version and values) a fresh bootstrap pull of every
/// scope value returns.
fn bootstrap(server: &mut dyn V3Server, epoch: &str) -> BTreeMap<String, (i64, Row)> {
    let pull = Frame::PullHeader {
        limit_commits: 0,
        limit_snapshot_rows: 0,
        max_snapshot_pages: 0,
        accept: 1,
    };
    let subscription = Frame::Subscription {
        id: "all".to_owned(),
        table: TABLE.to_owned(),
        scopes: vec![(
            "grp".to_owned(),
            GROUPS.iter().map(|g| (*g).to_owned()).collect(),
        )],
        params: None,
        cursor: -1,
        bootstrap_state: None,
    };
    let response = server
        .round(Some(epoch), vec![pull, subscription])
        .unwrap_or_else(|code| panic!("the bootstrap was refused: {code}"));
    let mut rows = BTreeMap::new();
    for frame in response.frames {
        match frame {
            Frame::SubStart { status, .. } => assert_eq!(status, SubStatus::Active),
            Frame::SegmentInline { payload } => {
                let segment = ssp2_v3::segment::decode_rows_segment(&payload)
                    .unwrap_or_else(|e| panic!("a rows segment does not decode: {e:?}"));
                for row in segment.blocks.into_iter().flatten() {
                    let values = named(row.values);
                    let id = values["id"].as_str().map(str::to_owned);
                    let id = id.unwrap_or_else(|| panic!("a row without an id: {values:?}"));
                    rows.insert(id, (row.server_version, values));
                }
            }
            Frame::SubEnd {
                bootstrap_state, ..
            } => assert!(bootstrap_state.is_none(), "the bootstrap did not complete"),
            _ => {}
        }
    }
    rows
}

// ---------------------------------------------------------------------------
// One case

fn sparse<T>(slot: &Slot<T>, value: impl Fn(&T) -> ColumnValue) -> SparseSlot {
    match slot {
        Slot::Absent => SparseSlot::Absent,
        Slot::Null => SparseSlot::Null,
        Slot::Value(v) => SparseSlot::Value(value(v)),
    }
}

/// Whether an upsert presents no column but the key.
fn key_only(op: &GenOp) -> bool {
    !op.delete
        && matches!(op.grp, Slot::Absent)
        && matches!(op.a, Slot::Absent)
        && matches!(op.b, Slot::Absent)
        && matches!(op.c, Slot::Absent)
}

/// The wire operation of `op`, its `baseVersion` resolved against the
/// row's version `current` (0 for a row the authority does not hold).
fn wire_operation(op: &GenOp, current: i64) -> Operation {
    let base_version = match op.base {
        Base::Absent => None,
        Base::Current => Some(current),
        Base::Stale => Some((current - 1).max(0)),
        Base::Zero => Some(0),
        Base::TooHigh => Some(current + 3),
        Base::Negative => Some(-1),
    };
    let payload = (!op.delete).then(|| {
        let row = vec![
            SparseSlot::Value(ColumnValue::String(ROW_IDS[op.row].to_owned())),
            sparse(&op.grp, |g| ColumnValue::String(GROUPS[*g].to_owned())),
            sparse(&op.a, |a| ColumnValue::String(a.clone())),
            sparse(&op.b, |b| ColumnValue::Integer(*b)),
            sparse(&op.c, |c| ColumnValue::Boolean(*c)),
        ];
        ssp2_v3::encode_sparse_row(&columns(), 0, &row)
    });
    Operation {
        table: TABLE.to_owned(),
        row_id: ROW_IDS[op.row].to_owned(),
        op: if op.delete { Op::Delete } else { Op::Upsert },
        base_version,
        payload,
    }
}

/// The decision that explains a difference in one operation's result,
/// if one does: `tainted` is whether a key-only update touched the row.
fn explained(
    op: &GenOp,
    tainted: bool,
    theirs: Option<&OpOutcome>,
    ours: &OpOutcome,
) -> Option<&'static str> {
    let code = |r: &OpOutcome| match r {
        OpOutcome::Error { code, .. } => Some(code.clone()),
        _ => None,
    };
    // D8: a negative `baseVersion` is `sync.invalid_request` here; the
    // authority reads it as an old version.
    if matches!(op.base, Base::Negative) {
        return (code(ours).as_deref() == Some("sync.invalid_request")).then_some("D8");
    }
    // D7: an absent row whose payload lacks its scope column is authorized
    // against what is known of it (nothing, or its delete's scopes) here,
    // so a versioned upsert gets `sync.row_missing`; the authority answers
    // `sync.forbidden` to any absent row it cannot scope from the payload.
    if !op.delete
        && matches!(op.grp, Slot::Absent)
        && matches!(op.base, Base::Current | Base::Stale | Base::TooHigh)
        && theirs.and_then(code).as_deref() == Some("sync.forbidden")
        && code(ours).as_deref() == Some("sync.row_missing")
    {
        return Some("D7");
    }
    // D3: after a key-only update the row's columns read as changed at its
    // version, so an older `baseVersion` conflicts here on more columns, or
    // where the authority applies.
    if tainted
        && matches!(ours, OpOutcome::Conflict { .. })
        && matches!(
            theirs,
            Some(OpOutcome::Applied | OpOutcome::Conflict { .. }) | None
        )
    {
        return Some("D3");
    }
    None
}

/// What one test compared: steps, and folded differences per decision.
#[derive(Debug, Default)]
struct Tally {
    steps: AtomicUsize,
    folded: Mutex<BTreeMap<&'static str, usize>>,
}

/// Compares one step's outcomes; returns `false` when a folded difference
/// left the two servers holding different rows (the case ends there).
fn compare(
    tally: &Tally,
    ops: &[GenOp],
    tainted: &[bool; ROW_IDS.len()],
    theirs: &Outcome,
    ours: &Outcome,
) -> Result<bool, TestCaseError> {
    if theirs == ours {
        return Ok(true);
    }
    let differ = || {
        TestCaseError::fail(format!(
            "the outcomes differ:\n  authority: {theirs:?}\n  syncstore: {ours:?}"
        ))
    };
    let (
        Outcome::Pushed {
            status: their_status,
            results: their_results,
            ..
        },
        Outcome::Pushed {
            status: our_status,
            results: our_results,
            ..
        },
    ) = (theirs, ours)
    else {
        return Err(differ());
    };
    // The first operation whose results differ must be explained by a
    // decision; what follows it in the commit is its consequence. An
    // operation one side applied and the other did not report (its commit
    // was rejected later on) is not a difference of its own.
    let omitted = |status: &PushStatus, reported: Option<&OpOutcome>, other: Option<&OpOutcome>| {
        *status == PushStatus::Rejected && reported.is_none() && other == Some(&OpOutcome::Applied)
    };
    let first = (0..ops.len()).find_map(|i| {
        let index = i32::try_from(i).ok()?;
        let (their, our) = (their_results.get(&index), our_results.get(&index));
        let same =
            their == our || omitted(our_status, our, their) || omitted(their_status, their, our);
        (!same).then_some((i, their, our))
    });
    let Some((i, their, Some(our))) = first else {
        return Err(differ());
    };
    let op = &ops[i];
    // A key-only update earlier in the same commit counts too.
    let touched = tainted[op.row] || ops[..i].iter().any(|o| o.row == op.row && key_only(o));
    let decision = explained(op, touched, their, our).ok_or_else(differ)?;
    if let Ok(mut folded) = tally.folded.lock() {
        *folded.entry(decision).or_default() += 1;
    }
    Ok(*their_status != PushStatus::Applied)
}

fn run_case(
    tally: &Tally,
    base_url: &str,
    partition: usize,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let opened = authority::LocalAuthority::open(":memory:", &schema());
    let mut theirs =
        Authority(opened.map_err(|e| TestCaseError::fail(format!("open: {}", e.code)))?);
    let mut ours = Ours {
        base_url,
        token: token(partition),
        agent: ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into(),
    };
    let their_epoch = log_epoch(&mut theirs);
    let our_epoch = log_epoch(&mut ours);
    let mut sent: Vec<(Frame, Vec<GenOp>)> = Vec::new();
    // Rows a key-only update touched (D3 applies to them from then on).
    let mut tainted = [false; ROW_IDS.len()];
    for (n, step) in steps.iter().enumerate() {
        let held = bootstrap(&mut theirs, &their_epoch);
        let (commit, ops) = match step {
            Step::Commit(ops) => {
                let operations = ops
                    .iter()
                    .map(|op| wire_operation(op, held.get(ROW_IDS[op.row]).map_or(0, |r| r.0)))
                    .collect();
                let commit = Frame::PushCommit {
                    client_commit_id: format!("commit-{n}"),
                    operations,
                };
                sent.push((commit.clone(), ops.clone()));
                (commit, ops.clone())
            }
            Step::Replay(_) if sent.is_empty() => continue,
            Step::Replay(k) => sent[k % sent.len()].clone(),
        };
        tally.steps.fetch_add(1, Ordering::Relaxed);
        let their_outcome = push(&mut theirs, &their_epoch, &commit);
        let our_outcome = push(&mut ours, &our_epoch, &commit);
        let same_rows = compare(tally, &ops, &tainted, &their_outcome, &our_outcome)
            .map_err(|e| TestCaseError::fail(format!("step {n} ({commit:?}): {e}")))?;
        if !same_rows {
            return Ok(());
        }
        if let Outcome::Pushed { status, .. } = &their_outcome {
            if *status == PushStatus::Applied {
                for op in &ops {
                    // An applied key-only update found its row.
                    if key_only(op) {
                        tainted[op.row] = true;
                    }
                }
            }
        }
        let their_rows = bootstrap(&mut theirs, &their_epoch);
        let our_rows = bootstrap(&mut ours, &our_epoch);
        prop_assert_eq!(their_rows, our_rows, "rows after step {}", n);
    }
    Ok(())
}

fn differential(dialect: Dialect) {
    let server = Server::start(dialect, &schema(), &tokens());
    let next = AtomicUsize::new(0);
    let tally = Tally::default();
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        max_shrink_iters: PARTITIONS as u32 - CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&sequence(), |steps| {
        let partition = next.fetch_add(1, Ordering::Relaxed);
        prop_assume!(partition < PARTITIONS);
        run_case(&tally, &server.base_url, partition, &steps)
    });
    eprintln!(
        "{dialect:?}: {} steps compared; folded by decision: {:?}",
        tally.steps.load(Ordering::Relaxed),
        tally.folded.lock().map(|f| f.clone()).unwrap_or_default()
    );
    if let Err(e) = result {
        panic!("{e}\n{}", server.server_log());
    }
}

#[test]
fn sqlite() {
    differential(Dialect::Sqlite);
}

#[test]
fn postgres() {
    differential(Dialect::Postgres);
}

#[test]
fn mariadb() {
    differential(Dialect::Mariadb);
}
