//! The partition write lock (`docs/design/mariadb.md` §8.3) in one
//! statement: the meta row in share mode (a migration's fence transaction
//! holds it exclusively), then the partition row, created if absent, under
//! the exclusive lock the insert or its duplicate-key update takes and
//! keeps until the transaction ends. No `SELECT … FOR UPDATE` follows: a
//! second session's insert of the same partition waits behind that lock
//! (and so would its `FOR UPDATE`).

use sync_core::Result;

use crate::pool::Conn;

/// The meta row's share lock and the partition row's exclusive lock, in
/// this order (the lock order of §8.3): the `SELECT` reads the meta row
/// with `LOCK IN SHARE MODE` before the row is inserted. Inserts no row
/// when the meta row does not exist.
const LOCK: &str = "INSERT INTO `sync_partitions` (`partition`) \
SELECT ? FROM `sync_schema_meta` WHERE `id` = 1 LOCK IN SHARE MODE \
ON DUPLICATE KEY UPDATE `partition` = `sync_partitions`.`partition`";

/// The partition row alone, for a database without a meta row (no schema
/// ensured yet: there is nothing to share-lock).
const LOCK_WITHOUT_META: &str = "INSERT INTO `sync_partitions` (`partition`) VALUES (?) \
ON DUPLICATE KEY UPDATE `partition` = `partition`";

/// Takes the partition write lock inside the open transaction: one
/// statement (two on a database without a meta row). With
/// `CLIENT_FOUND_ROWS` both an inserted and an existing partition row
/// count as one affected row, so none means the meta row was absent.
pub(crate) fn lock_partition(conn: &mut Conn, partition: &str) -> Result<()> {
    if conn.exec(LOCK, (partition,))? == 0 {
        conn.exec(LOCK_WITHOUT_META, (partition,))?;
    }
    Ok(())
}
