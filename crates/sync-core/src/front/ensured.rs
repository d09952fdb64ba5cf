//! What a backend recorded when `ensure_schema` last succeeded, as far as
//! the front needs it: the compiled schema and each table's handle.

use std::sync::Arc;

use crate::schema::{CompiledSchema, CompiledTable};

/// The schema a backend ensured: the front checks table names against it
/// and hands the backend its own handle of each table it names.
pub trait EnsuredSchema: Send + Sync {
    /// The backend's handle of one table (for example its prepared SQL text).
    type Handle: Send + Sync;

    /// The compiled schema (its version is the running version).
    fn schema(&self) -> &Arc<CompiledSchema>;

    /// The compiled table and its handle, `None` for a name the schema
    /// does not have.
    fn table(&self, name: &str) -> Option<(&CompiledTable, &Self::Handle)>;
}
