//! The one writer connection and whose turn it is: one thread at a time,
//! and — with group commit on ([`GroupCommit`]) — several transactions from
//! `begin` in a row inside one SQLite transaction, committed once.
//!
//! A group is opened by its first member (the leader) with
//! `BEGIN IMMEDIATE`. When a member ends while other transactions wait for
//! the writer, no pool-level writer waits, and the group is below its size
//! and age bounds, the member parks the open transaction (the connection
//! stays inside it) and the next waiting transaction joins it under
//! `SAVEPOINT sync_group_member`; otherwise the member runs the group's one
//! `COMMIT` and tells every member the outcome. A member that committed
//! waits for that outcome before its `commit` returns; a member that rolls
//! back undoes only its savepoint. A lost shared transaction (SQLite rolls
//! the whole transaction back after an I/O error or a full disk) or a failed
//! `COMMIT` fails every member that committed: none is acknowledged and
//! nothing of the group persisted.
//!
//! Pool-level writes ([`Writer::alone`]) never join a group: they wait until
//! the open group is committed, and a group stops taking members as soon as
//! one of them waits.
//!
//! Waiters are woken one at a time: each kind (transactions from `begin`,
//! pool-level writes) waits on its own condition variable, and giving the
//! turn back wakes one waiter of each kind that may take it (a parked group
//! wakes one transaction only). A woken waiter that finds the turn taken
//! waits again; whoever took it wakes the next one. Waking every waiter
//! each time cost 16 threads sharing a group about a fifth of their CPU in
//! futex wake-ups and context switches (`docs/benchmarks.md`, "A push that
//! shares its COMMIT").

use std::collections::HashSet;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use r2d2::Pool;
use rusqlite::Connection;
use sync_core::{Error, ErrorCode, Result};

use crate::config::GroupCommit;
use crate::errors::pool_error;
use crate::file_state;
use crate::pools::{begin_immediate, commit, exec, rollback, Conn, Manager};
use crate::wal::Checkpointer;

/// The savepoint a joining member runs under.
const MEMBER_SAVEPOINT: &str = "SAVEPOINT sync_group_member";
const ROLLBACK_TO_MEMBER: &str = "ROLLBACK TO SAVEPOINT sync_group_member";
const RELEASE_MEMBER: &str = "RELEASE SAVEPOINT sync_group_member";

/// The writer connection of one storage and its turn-taking.
#[derive(Debug)]
pub(crate) struct Writer {
    pool: Pool<Manager>,
    /// The database file as SQLite resolved it (moved-file checks).
    file: PathBuf,
    /// How long a caller waits for its turn (`writer_wait_ms`).
    wait: Duration,
    group: GroupCommit,
    turn: Mutex<Turn>,
    /// Waited on by transactions from `begin`; one is woken when the turn
    /// comes free or a group is parked.
    member_turn: Condvar,
    /// Waited on by pool-level writers; one is woken when the turn comes
    /// free with no group parked.
    alone_turn: Condvar,
    /// Notified when a caller starts waiting (for [`Writer::await_queued`]).
    queued: Condvar,
    /// The background WAL checkpointer, told about every commit.
    checkpointer: Option<Checkpointer>,
}

/// Who holds the writer and who waits for it.
#[derive(Debug, Default)]
struct Turn {
    /// A thread holds the connection (alone or as a group member).
    held: bool,
    /// An open group waiting for its next member.
    parked: Option<Parked>,
    /// Transactions from `begin` waiting for their turn.
    members_waiting: usize,
    /// Pool-level writers waiting for their turn.
    alone_waiting: usize,
    /// Callers of [`Writer::await_queued`] waiting.
    queue_watchers: usize,
}

/// An open group's connection (inside its transaction) between members.
#[derive(Debug)]
struct Parked {
    conn: Conn,
    group: Arc<Group>,
}

/// What every member of one group learns when it ends.
#[derive(Debug)]
struct Group {
    state: Mutex<GroupState>,
    done: Condvar,
}

#[derive(Debug, Default)]
struct GroupState {
    /// Members so far (the leader included).
    members: u32,
    /// When the first member ended and parked the group.
    first_parked: Option<Instant>,
    /// Idempotency keys whose push results members stored (not committed
    /// until the group is).
    keys: HashSet<String>,
    /// Set once, by the member that closes the group.
    outcome: Option<Outcome>,
}

/// How a group ended.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Committed,
    /// Nothing persisted; the code and cause of the failed statement.
    Failed(ErrorCode, Option<sync_core::BackendCause>),
}

impl Group {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(GroupState {
                members: 1,
                first_parked: None,
                keys: HashSet::new(),
                outcome: None,
            }),
            done: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, GroupState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn members(&self) -> u32 {
        self.lock().members
    }

    fn join(&self) {
        self.lock().members += 1;
    }

    /// Whether the group may take another member: below the size bound and
    /// parked for the first time less than `max_wait` ago. Records the
    /// first parking.
    fn may_grow(&self, bounds: GroupCommit) -> bool {
        let mut state = self.lock();
        let first = *state.first_parked.get_or_insert_with(Instant::now);
        state.members < bounds.max_members
            && first.elapsed() < Duration::from_millis(bounds.max_wait_ms)
    }

    /// Records the outcome (the first one wins) and wakes every member.
    fn publish(&self, result: &Result<()>) {
        let mut state = self.lock();
        if state.outcome.is_none() {
            state.outcome = Some(match result {
                Ok(()) => Outcome::Committed,
                Err(error) => Outcome::Failed(error.code(), error.cause()),
            });
        }
        drop(state);
        self.done.notify_all();
    }

    /// Waits until the member that closes the group publishes its outcome.
    fn wait(&self) -> Outcome {
        let mut state = self.lock();
        loop {
            if let Some(outcome) = state.outcome {
                return outcome;
            }
            state = self
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The error every committed member of a failed group receives.
fn group_failed(code: ErrorCode, cause: Option<sync_core::BackendCause>, members: u32) -> Error {
    let error = Error::new(ErrorCode::GroupCommitFailed)
        .detail("failed_code", code.as_str())
        .detail("members", members);
    match cause {
        Some(cause) => error.with_cause(cause),
        None => error,
    }
}

/// Which kind of caller waits for the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Member,
    Alone,
}

impl Writer {
    pub(crate) fn new(
        pool: Pool<Manager>,
        file: PathBuf,
        wait: Duration,
        group: GroupCommit,
        checkpointer: Option<Checkpointer>,
    ) -> Self {
        Self {
            pool,
            file,
            wait,
            group,
            turn: Mutex::new(Turn::default()),
            member_turn: Condvar::new(),
            alone_turn: Condvar::new(),
            queued: Condvar::new(),
            checkpointer,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Turn> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The background checkpointer, if any.
    pub(crate) fn checkpointer(&self) -> Option<&Checkpointer> {
        self.checkpointer.as_ref()
    }

    /// Takes the writer alone: waits until no group is open and nobody holds
    /// it (`busy` after `writer_wait_ms`), then checks the file out.
    pub(crate) fn alone(&self) -> Result<AloneWriter<'_>> {
        self.take_turn(Kind::Alone)?;
        self.check_out_alone()
    }

    /// Takes the writer alone only when nobody holds it, waits for it or
    /// has a group parked on it; never waits. `None` also when the file
    /// cannot be checked out for writing (a read-only file still serves
    /// reads through the readers).
    pub(crate) fn try_alone(&self) -> Option<AloneWriter<'_>> {
        {
            let mut turn = self.lock();
            if turn.held
                || turn.parked.is_some()
                || turn.members_waiting > 0
                || turn.alone_waiting > 0
            {
                return None;
            }
            turn.held = true;
        }
        self.check_out_alone().ok()
    }

    /// With the turn taken alone: checks the connection out, or gives the
    /// turn back.
    fn check_out_alone(&self) -> Result<AloneWriter<'_>> {
        match self.checkout() {
            Ok(conn) => Ok(AloneWriter {
                conn,
                turn: TurnGuard(self),
            }),
            Err(error) => {
                self.release();
                Err(error)
            }
        }
    }

    /// Takes the writer for a transaction from `begin`: joins the open group
    /// (`SAVEPOINT`) or opens a new one (`BEGIN IMMEDIATE`).
    pub(crate) fn member(self: &Arc<Self>) -> Result<Seat> {
        match self.take_turn(Kind::Member)? {
            Some(Parked { conn, group }) => self.join(conn, group),
            None => {
                let conn = match self.checkout() {
                    Ok(conn) => conn,
                    Err(error) => {
                        self.release();
                        return Err(error);
                    }
                };
                if let Err(error) = begin_immediate(&conn) {
                    drop(conn);
                    self.release();
                    return Err(error);
                }
                Ok(Seat {
                    writer: Arc::clone(self),
                    conn,
                    group: Group::new(),
                    joined: false,
                })
            }
        }
    }

    fn join(self: &Arc<Self>, conn: Conn, group: Arc<Group>) -> Result<Seat> {
        group.join();
        match exec(&conn, MEMBER_SAVEPOINT) {
            // A SAVEPOINT outside a transaction would open a new one: the
            // shared transaction must still be there.
            Ok(()) if !conn.is_autocommit() => Ok(Seat {
                writer: Arc::clone(self),
                conn,
                group,
                joined: true,
            }),
            outcome => {
                // This transaction never started; the members before it
                // are committed (or failed) by the group's COMMIT now.
                let _ = self.close(conn, &group);
                Err(outcome.err().unwrap_or_else(|| {
                    Error::new(ErrorCode::Backend).detail("reason", "transaction_lost")
                }))
            }
        }
    }

    /// Checks the connection out of the one-connection pool, refusing a
    /// moved, missing or read-only database file.
    fn checkout(&self) -> Result<Conn> {
        file_state::refuse_if_missing(&self.file)?;
        let conn = self.pool.get().map_err(pool_error)?;
        file_state::refuse_if_moved(&conn)?;
        file_state::refuse_if_read_only(&conn)?;
        Ok(conn)
    }

    /// Waits for the turn; a member may receive the parked group.
    fn take_turn(&self, kind: Kind) -> Result<Option<Parked>> {
        let deadline = Instant::now() + self.wait;
        let mut turn = self.lock();
        match kind {
            Kind::Member => turn.members_waiting += 1,
            Kind::Alone => turn.alone_waiting += 1,
        }
        if turn.queue_watchers > 0 {
            self.queued.notify_all();
        }
        // Each kind waits on its own condition variable and is woken one at
        // a time: a woken caller that finds the turn taken waits again, and
        // the taker wakes the next one when it gives the turn back.
        let waiting = match kind {
            Kind::Member => &self.member_turn,
            Kind::Alone => &self.alone_turn,
        };
        loop {
            if !turn.held && (kind == Kind::Member || turn.parked.is_none()) {
                turn.held = true;
                return Ok(match kind {
                    Kind::Member => {
                        turn.members_waiting -= 1;
                        turn.parked.take()
                    }
                    Kind::Alone => {
                        turn.alone_waiting -= 1;
                        None
                    }
                });
            }
            let now = Instant::now();
            if now >= deadline {
                match kind {
                    Kind::Member => turn.members_waiting -= 1,
                    Kind::Alone => turn.alone_waiting -= 1,
                }
                // A group parked for a member that gave up: nobody else may
                // take it, so this caller commits it for its members.
                let orphan = if !turn.held && turn.members_waiting == 0 {
                    turn.parked.take()
                } else {
                    None
                };
                if orphan.is_some() {
                    turn.held = true;
                }
                drop(turn);
                if let Some(Parked { conn, group }) = orphan {
                    let _ = self.close(conn, &group);
                }
                return Err(Error::busy("timed out waiting for the writer connection"));
            }
            turn = waiting
                .wait_timeout(turn, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Waits until at least `members` transactions from `begin` and `alone`
    /// pool-level writers wait for the writer (`busy` after `writer_wait_ms`).
    pub(crate) fn await_queued(&self, members: usize, alone: usize) -> Result<()> {
        let deadline = Instant::now() + self.wait;
        let mut turn = self.lock();
        turn.queue_watchers += 1;
        let outcome = loop {
            if turn.members_waiting >= members && turn.alone_waiting >= alone {
                break Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(Error::busy("timed out waiting for queued writers"));
            }
            turn = self
                .queued
                .wait_timeout(turn, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        turn.queue_watchers -= 1;
        outcome
    }

    /// Gives the turn back (the connection is already back in the pool or
    /// parked) and wakes the waiters.
    fn release(&self) {
        let mut turn = self.lock();
        turn.held = false;
        let wake_member = turn.members_waiting > 0;
        let wake_alone = turn.alone_waiting > 0 && turn.parked.is_none();
        drop(turn);
        if wake_member {
            self.member_turn.notify_one();
        }
        if wake_alone {
            self.alone_turn.notify_one();
        }
    }

    /// Parks the group's connection for the next waiting member when the
    /// group may grow; otherwise hands it back.
    fn park_or_keep(&self, conn: Conn, group: &Arc<Group>) -> Option<Conn> {
        if !self.group.enabled() || conn.is_autocommit() {
            return Some(conn);
        }
        let mut turn = self.lock();
        let grows =
            turn.members_waiting > 0 && turn.alone_waiting == 0 && group.may_grow(self.group);
        if !grows {
            return Some(conn);
        }
        turn.parked = Some(Parked {
            conn,
            group: Arc::clone(group),
        });
        turn.held = false;
        drop(turn);
        // Only a transaction from `begin` may take a parked group, and one
        // waits (`grows` above).
        self.member_turn.notify_one();
        None
    }

    /// Runs the group's `COMMIT`, tells every member, gives the turn back.
    /// Returns the `COMMIT`'s own result.
    fn close(&self, conn: Conn, group: &Group) -> Result<()> {
        let result = commit(&conn);
        drop(conn);
        if result.is_ok() {
            if let Some(checkpointer) = &self.checkpointer {
                checkpointer.committed();
            }
        }
        group.publish(&result);
        self.release();
        result
    }

    /// Abandons the whole group (its transaction is in an unknown state):
    /// `ROLLBACK`, every member told `error`, the turn given back.
    fn abandon(&self, conn: Conn, group: &Group, error: &Error) {
        rollback(&conn);
        drop(conn);
        group.publish(&Err(Error::new(error.code())));
        self.release();
    }
}

/// The writer held alone; derefs to the connection. Dropping it returns
/// the connection to the pool, then gives the turn back.
pub(crate) struct AloneWriter<'w> {
    // Field order is drop order: the connection first.
    conn: Conn,
    turn: TurnGuard<'w>,
}

/// Gives the turn back when dropped.
struct TurnGuard<'w>(&'w Writer);

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl AloneWriter<'_> {
    /// Tells the checkpointer about a commit this writer made.
    pub(crate) fn committed(&self) {
        if let Some(checkpointer) = &self.turn.0.checkpointer {
            checkpointer.committed();
        }
    }
}

impl Deref for AloneWriter<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl std::fmt::Debug for AloneWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AloneWriter").finish_non_exhaustive()
    }
}

/// One transaction's place on the writer: the connection inside the
/// group's SQLite transaction (the leader's own `BEGIN IMMEDIATE`, or a
/// joined member's savepoint). Ended by [`Seat::commit`] or
/// [`Seat::rollback`].
#[derive(Debug)]
pub(crate) struct Seat {
    writer: Arc<Writer>,
    conn: Conn,
    group: Arc<Group>,
    /// False for the leader, which began the SQLite transaction.
    joined: bool,
}

/// One idempotency key as the group records it.
fn key(partition: &str, client_id: &str, client_commit_id: &str) -> String {
    format!("{partition}\u{0}{client_id}\u{0}{client_commit_id}")
}

impl Seat {
    /// The writer connection.
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Records that this member stored the push result of a key.
    pub(crate) fn stored_key(&self, partition: &str, client_id: &str, client_commit_id: &str) {
        self.group
            .lock()
            .keys
            .insert(key(partition, client_id, client_commit_id));
    }

    /// Whether an earlier member of this group stored the push result of
    /// the key: it is visible here but not committed yet, so a replay of it
    /// must not be answered before the group's `COMMIT`.
    pub(crate) fn key_pending(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> bool {
        self.joined
            && self
                .group
                .lock()
                .keys
                .contains(&key(partition, client_id, client_commit_id))
    }

    /// Ends this member with its writes kept. Returns after the group's
    /// `COMMIT`: `Ok` once it succeeded; its own error for a transaction
    /// that committed alone; `group_commit_failed` for a member of a group
    /// of two or more whose `COMMIT` failed or whose transaction was lost.
    pub(crate) fn commit(self) -> Result<()> {
        let Seat {
            writer,
            conn,
            group,
            joined,
        } = self;
        if joined {
            if let Err(error) = exec(&conn, RELEASE_MEMBER) {
                writer.abandon(conn, &group, &error);
                return Err(group_failed(error.code(), error.cause(), group.members()));
            }
        }
        let Some(conn) = writer.park_or_keep(conn, &group) else {
            return match group.wait() {
                Outcome::Committed => Ok(()),
                Outcome::Failed(code, cause) => Err(group_failed(code, cause, group.members())),
            };
        };
        let result = writer.close(conn, &group);
        match result {
            Err(error) if group.members() > 1 => {
                Err(group_failed(error.code(), error.cause(), group.members()))
            }
            result => result,
        }
    }

    /// Ends this member with its writes undone; never fails. The leader
    /// rolls the SQLite transaction back (nobody joined it yet); a joined
    /// member rolls back to its savepoint and leaves the group to the next
    /// member or commits it for the members before it.
    pub(crate) fn rollback(self) {
        let Seat {
            writer,
            conn,
            group,
            joined,
        } = self;
        if !joined {
            rollback(&conn);
            drop(conn);
            writer.release();
            return;
        }
        let undone = exec(&conn, ROLLBACK_TO_MEMBER).and_then(|()| exec(&conn, RELEASE_MEMBER));
        match undone {
            Ok(()) if !conn.is_autocommit() => {
                if let Some(conn) = writer.park_or_keep(conn, &group) {
                    let _ = writer.close(conn, &group);
                }
            }
            Ok(()) => {
                let lost = Error::new(ErrorCode::Backend).detail("reason", "transaction_lost");
                writer.abandon(conn, &group, &lost);
            }
            Err(error) => writer.abandon(conn, &group, &error),
        }
    }
}
