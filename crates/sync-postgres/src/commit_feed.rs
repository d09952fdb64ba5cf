//! The commit feed of Postgres (`sync_core::CommitFeed`): a storage built
//! with `PostgresConfig::announce_commits` sends `NOTIFY syncstore_commits`
//! in the transaction of every commit it appends (delivered at commit,
//! dropped on rollback), and a listener of any process on the same database
//! hears it on a connection of its own, outside the pool.
//!
//! The payload is JSON `{"s": schema, "p": partition, "q": commit_seq}`:
//! the channel is database-wide, so a listener keeps only the notices of
//! its own schema. A notice never carries row data.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};
use sync_core::{CommitFeed, CommitListener, CommitNotice, Error, FeedEvent, Result};

/// The channel every announcing storage notifies.
pub(crate) const CHANNEL: &str = "syncstore_commits";

/// The statement that announces commit `seq` of `partition`, sent with
/// the transaction's later statements or its `COMMIT`; `None` for a
/// partition name no literal can hold (a NUL, refused long before).
pub(crate) fn announce_sql(partition: &str, seq: i64) -> Option<String> {
    let partition = crate::sql::quote_literal(partition)?;
    Some(format!(
        "SELECT pg_notify('{CHANNEL}', json_build_object('s', current_schema(), 'p', \
         {partition}, 'q', {seq})::text)"
    ))
}

/// Listens on the database of `config` for the commits of `schema` (the
/// connection's default schema when `None`).
#[derive(Debug, Clone)]
pub(crate) struct PostgresCommitFeed {
    pub(crate) config: postgres::Config,
    pub(crate) schema: Option<String>,
}

struct Listener {
    client: Client,
    schema: String,
}

impl CommitFeed for PostgresCommitFeed {
    fn listen(&self) -> Result<Box<dyn CommitListener>> {
        // Named for operators (`pg_stat_activity.application_name`).
        let mut config = self.config.clone();
        config.application_name(&application_name(self.schema.as_deref()));
        let mut client = config.connect(NoTls).map_err(Error::backend)?;
        let schema = match &self.schema {
            Some(schema) => schema.clone(),
            None => client
                .query_one("SELECT current_schema()::text", &[])
                .and_then(|row| row.try_get::<_, String>(0))
                .map_err(Error::backend)?,
        };
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .map_err(Error::backend)?;
        Ok(Box::new(Listener { client, schema }))
    }
}

impl CommitListener for Listener {
    fn next(&mut self, wait: Duration) -> FeedEvent {
        let next = self.client.notifications().timeout_iter(wait).next();
        match next {
            Ok(Some(notification)) => match parse(notification.payload()) {
                Some((schema, notice)) if schema == self.schema => FeedEvent::Commit(notice),
                _ => FeedEvent::Idle,
            },
            Ok(None) if self.client.is_closed() => FeedEvent::Lost,
            Ok(None) => FeedEvent::Idle,
            Err(_) => FeedEvent::Lost,
        }
    }
}

/// `syncstore commit feed [<schema>]`, cut to Postgres' 63 bytes.
pub(crate) fn application_name(schema: Option<&str>) -> String {
    let mut name = match schema {
        Some(schema) => format!("syncstore commit feed {schema}"),
        None => "syncstore commit feed".to_owned(),
    };
    while name.len() > 63 {
        name.pop();
    }
    name
}

/// `(schema, notice)` of a payload; `None` for one this crate did not send.
fn parse(payload: &str) -> Option<(String, CommitNotice)> {
    let value: serde_json::Value = serde_json::from_str(payload).ok()?;
    Some((
        value.get("s")?.as_str()?.to_owned(),
        CommitNotice {
            partition: value.get("p")?.as_str()?.to_owned(),
            commit_seq: value.get("q")?.as_i64()?,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn payloads_of_this_crate_parse_and_others_are_ignored() {
        let (schema, notice) = parse(r#"{"s": "app", "p": "tenant:1", "q": 42}"#).unwrap();
        assert_eq!(schema, "app");
        assert_eq!(
            (notice.partition.as_str(), notice.commit_seq),
            ("tenant:1", 42)
        );
        assert!(parse("hello").is_none());
        assert!(parse(r#"{"s": "app", "p": "x"}"#).is_none());
    }
}
