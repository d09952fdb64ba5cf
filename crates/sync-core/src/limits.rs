//! Global limits and defaults (`README.md` §5).

/// 2^53 − 1: the largest integer the reference clients represent exactly.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;
/// Maximum UTF-8 byte length of a checkpoint name.
pub const MAX_CHECKPOINT_NAME_BYTES: usize = 128;
/// Maximum UTF-8 byte length of a row id a client may push: every dialect
/// can index it, including InnoDB's 3 072-byte keys (`docs/design/mariadb.md`
/// §4; `docs/decisions.md`, key lengths).
pub const MAX_ROW_ID_BYTES: usize = 1024;
/// Maximum UTF-8 byte length of a scope value derived from a pushed row
/// (it is a key of the scope index).
pub const MAX_SCOPE_VALUE_BYTES: usize = 1024;
/// Maximum UTF-8 byte length of a client id in a request.
pub const MAX_CLIENT_ID_BYTES: usize = 255;
/// Maximum UTF-8 byte length of a client commit id in a request.
pub const MAX_CLIENT_COMMIT_ID_BYTES: usize = 255;
/// Maximum UTF-8 byte length of a blob id referenced by a pushed row (it
/// is a key of the blob reference index).
pub const MAX_BLOB_ID_BYTES: usize = 255;
/// Largest `limit` of index lookups, partition scans and source-change listings.
pub const MAX_LOOKUP_LIMIT: i64 = 1000;
/// Minimum candidate page of commit windows and row scans.
pub const MIN_CANDIDATE_PAGE: i64 = 64;
/// Page size of migration rewrites.
pub const REWRITE_PAGE_ROWS: i64 = 500;
/// Default SQLite busy timeout.
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 5_000;
/// Default SQLite reader pool size.
pub const DEFAULT_SQLITE_READERS: u32 = 8; // tidy: dialect-name (a built-in dialect's documented default)
/// Default Postgres pool size.
pub const DEFAULT_POSTGRES_POOL_SIZE: u32 = 16; // tidy: dialect-name (a built-in dialect's documented default)
/// Default pool checkout wait.
pub const DEFAULT_POOL_WAIT_MS: u64 = 30_000;
/// Default backfill batch (source rows per transaction).
pub const DEFAULT_BACKFILL_BATCH: i64 = 500;
/// Default backfill attempts.
pub const DEFAULT_BACKFILL_ATTEMPTS: u32 = 10;
