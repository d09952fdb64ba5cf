//! The round entry (`ServerStorage::enter_round`): the registry entry, the
//! serve gate, the client record, the stored push results and (asked for)
//! the log bounds read in one snapshot — on the writer connection when it
//! is idle (its page cache is current), else on a reader; then, only when
//! the entry is missing or older than the request's refresh interval, the
//! registry touch on the writer. A busy partition's round therefore takes
//! no write transaction at entry, and one checkout instead of three plus
//! one per commit.

use sync_core::{LogBounds, PartitionRegistryEntry, Result, RoundEntry, RoundEntryRequest};

use crate::pools::Pools;
use crate::{clients, commit_log, gate, push_results, registry};

/// Reads the entry of a request the front checked.
pub(crate) fn enter(pools: &Pools, request: &RoundEntryRequest) -> Result<RoundEntry> {
    let partition = request.partition.as_str();
    let (stored, gate, client_record, texts, log_bounds) = pools.read_snapshot_warm(|conn| {
        let stored = registry::get(conn, partition)?;
        let gate = gate::read(conn, partition, request.running_schema_version)?;
        let record = clients::get(conn, partition, &request.client_id)?;
        let texts = request
            .client_commit_ids
            .iter()
            .map(|id| push_results::get_text(conn, partition, &request.client_id, id))
            .collect::<Result<Vec<_>>>()?;
        let bounds = if request.log_bounds {
            Some(LogBounds {
                max_commit_seq: commit_log::max_commit_seq(conn, partition)?,
                horizon_seq: commit_log::horizon_seq(conn, partition)?,
            })
        } else {
            None
        };
        Ok((stored, gate, record, texts, bounds))
    })?;
    let (registry, gate) = match stored.filter(|entry| fresh(entry, request)) {
        Some(entry) => (entry, gate),
        None => {
            let touched = pools.write_once(|conn| {
                registry::touch(
                    conn,
                    partition,
                    request.authenticated_at_ms,
                    &request.initial_log_epoch,
                )
            })?;
            // A first contact (or a rotation since the reads) changed the
            // epoch the gate reports: read the gate again, after the touch.
            let gate = if gate.log_epoch.as_deref() == Some(touched.log_epoch.as_str()) {
                gate
            } else {
                pools.read(|conn| gate::read(conn, partition, request.running_schema_version))?
            };
            (touched, gate)
        }
    };
    Ok(RoundEntry {
        registry,
        gate,
        client_record,
        push_results: texts.into_iter().map(push_results::parse).collect(),
        log_bounds,
    })
}

/// Whether the stored entry may be returned without a refresh.
fn fresh(entry: &PartitionRegistryEntry, request: &RoundEntryRequest) -> bool {
    request.refresh_after_ms > 0
        && entry.last_authenticated_at_ms
            > request
                .authenticated_at_ms
                .saturating_sub(request.refresh_after_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(at: i64) -> PartitionRegistryEntry {
        PartitionRegistryEntry {
            partition: "p".into(),
            log_epoch: "e".into(),
            epoch_required: false,
            last_authenticated_at_ms: at,
        }
    }

    fn at(now: i64, refresh_after_ms: i64) -> RoundEntryRequest {
        RoundEntryRequest {
            authenticated_at_ms: now,
            refresh_after_ms,
            ..RoundEntryRequest::default()
        }
    }

    #[test]
    fn an_entry_is_fresh_strictly_inside_its_interval() {
        assert!(fresh(&stamped(1_000), &at(1_999, 1_000)));
        // Exactly one interval old: refreshed.
        assert!(!fresh(&stamped(1_000), &at(2_000, 1_000)));
        assert!(!fresh(&stamped(1_000), &at(5_000, 1_000)));
    }

    #[test]
    fn no_interval_always_refreshes_even_a_stamp_from_the_future() {
        // Another process's clock ahead of this one's wrote the stamp.
        assert!(!fresh(&stamped(9_000), &at(1_000, 0)));
        assert!(!fresh(&stamped(1_000), &at(1_000, 0)));
    }
}
