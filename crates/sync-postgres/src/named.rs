//! Named server-side statements (`PREPARE name(types) AS …`) for the
//! messages this crate sends through the simple-query protocol.
//!
//! A push sends its lock (with the fence and gate reads) and its deferred
//! append and push result as simple-query messages, so that several
//! statements travel in one round trip. A plain statement in such a message
//! is parsed and planned by the server every time; an `EXECUTE` of a named
//! statement only parses its literal arguments and reuses the statement's
//! cached plan. Each pooled connection prepares a name once, in a round trip
//! of its own (`Conn::ensure_named`), before the first message that
//! executes it, so a failed message never leaves it unsure whether the
//! name exists. Prepared statements outlive transactions and follow
//! `search_path` changes (the server re-plans), and they end with the
//! session.

use std::sync::LazyLock;

use crate::{clients, commit_log, partition_lock, push_results};

/// One named statement: its name, parameter types and SQL text.
pub(crate) struct Named {
    /// Statement name (`sync_` prefix, unique in this crate).
    pub(crate) name: &'static str,
    /// Parameter types in order, as the `PREPARE` list.
    pub(crate) types: &'static str,
    /// The statement, with `$n` parameters.
    pub(crate) sql: LazyLock<String>,
}

impl Named {
    /// The `PREPARE` statement that creates it.
    pub(crate) fn prepare_sql(&self) -> String {
        format!("PREPARE {}({}) AS {}", self.name, self.types, *self.sql)
    }

    /// `EXECUTE name(args…)` for already rendered literal arguments.
    pub(crate) fn execute_sql(&self, args: &[String]) -> String {
        format!("EXECUTE {}({})", self.name, args.join(", "))
    }
}

/// Creates the partition's counter row if absent: `$1` partition.
pub(crate) static LOCK_INSERT: Named = Named {
    name: "sync_push_lock_insert",
    types: "text",
    sql: LazyLock::new(|| partition_lock::INSERT_SQL.to_owned()),
};

/// Locks the counter row and reads it: `$1` partition.
pub(crate) static LOCK_ROW: Named = Named {
    name: "sync_push_lock_row",
    types: "text",
    sql: LazyLock::new(|| {
        "SELECT max_commit_seq FROM sync_partitions WHERE partition = $1 FOR UPDATE".to_owned()
    }),
};

/// The partition and database-wide writer fences, then the serve gate: `$1`
/// partition, `$2` running schema version.
pub(crate) static PUSH_STATE: Named = Named {
    name: "sync_push_state",
    types: "text, int4",
    sql: LazyLock::new(|| partition_lock::push_state_sql("$1", "$2")),
};

/// The push prelude's idempotency read: `$1` partition, `$2` client, `$3`
/// commit id.
pub(crate) static GET_PUSH_RESULT: Named = Named {
    name: "sync_prelude_push_result",
    types: "text, text, text",
    sql: LazyLock::new(|| push_results::GET_SQL.to_owned()),
};

/// The deferred append (`commit_log::append_named_args`).
pub(crate) static APPEND: Named = Named {
    name: "sync_deferred_append",
    types: commit_log::DEFERRED_APPEND_TYPES,
    sql: LazyLock::new(commit_log::deferred_append_sql),
};

/// The deferred push result: `$1` partition, `$2` client, `$3` commit id,
/// `$4` result JSON.
pub(crate) static PUT_PUSH_RESULT: Named = Named {
    name: "sync_deferred_push_result",
    types: "text, text, text, text",
    sql: LazyLock::new(|| push_results::PUT_SQL.to_owned()),
};

/// The deferred client record of a round's last push: `$1` partition,
/// `$2` client, `$3` actor, `$4` wire version, `$5` cursor, `$6`
/// subscriptions JSON, `$7` time.
pub(crate) static PUT_CLIENT_RECORD: Named = Named {
    name: "sync_deferred_client_record",
    types: "text, text, text, int4, int8, text, int8",
    sql: LazyLock::new(|| clients::PUT_SQL.to_owned()),
};

/// Every named statement a push uses, prepared together on first use.
pub(crate) fn all() -> [&'static Named; 7] {
    [
        &LOCK_INSERT,
        &LOCK_ROW,
        &PUSH_STATE,
        &GET_PUSH_RESULT,
        &APPEND,
        &PUT_PUSH_RESULT,
        &PUT_CLIENT_RECORD,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_prefixed() {
        let names: std::collections::BTreeSet<_> = all().iter().map(|n| n.name).collect();
        assert_eq!(names.len(), all().len());
        assert!(names.iter().all(|n| n.starts_with("sync_")));
    }

    #[test]
    fn every_statement_numbers_exactly_its_declared_parameters() {
        for named in all() {
            let declared = named.types.split(',').count();
            let sql = named.sql.as_str();
            assert!(sql.contains(&format!("${declared}")), "{}", named.name);
            assert!(
                !sql.contains(&format!("${}", declared + 1)),
                "{}",
                named.name
            );
        }
    }
}
