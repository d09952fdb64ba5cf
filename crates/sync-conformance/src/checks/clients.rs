//! §11 Clients and partition registry, C-187…C-198.

use std::sync::Barrier;
use std::thread;

use sync_core::{
    ClientCursorInfo, ClientRecord, ClientSubscription, ErrorCode, PartitionRegistryEntry,
    ServerStorage,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure};
use crate::checks::support_pdata::{filter, joined, touch, EPOCH, P};
use crate::context::{Ctx, NOW};
use crate::fixtures::fix1;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "clients";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-187",
        "put_client_record round-trips and a re-put replaces",
        c187_client_record_round_trip,
    ),
    check(
        GROUP,
        "C-188",
        "list_client_cursors is ordered by client id",
        c188_list_client_cursors,
    ),
    check(
        GROUP,
        "C-189",
        "advance_client_cursor with matching guards keeps the maxima",
        c189_advance_cursor_maxima,
    ),
    check(
        GROUP,
        "C-190",
        "advance_client_cursor with wrong actor, wrong epoch or no record changes nothing",
        c190_advance_cursor_guards,
    ),
    check(
        GROUP,
        "C-191",
        "update_client_cursor on a missing record is false and creates nothing",
        c191_update_missing_record,
    ),
    check(
        GROUP,
        "C-192",
        "get_active_client_cursor_floor",
        c192_active_cursor_floor,
    ),
    check(
        GROUP,
        "C-193",
        "list_partitions is empty when fresh and byte-ordered",
        c193_list_partitions,
    ),
    check(
        GROUP,
        "C-194",
        "a second touch keeps the epoch and refreshes activity",
        c194_touch_keeps_epoch,
    ),
    check(
        GROUP,
        "C-195",
        "touch or rotate with an empty epoch is invalid_log_epoch",
        c195_empty_epoch,
    ),
    check(
        GROUP,
        "C-196",
        "rotation sets the epoch and deletes only this partition's client records",
        c196_rotate,
    ),
    check(
        GROUP,
        "C-197",
        "concurrent touches with different epochs return one persisted epoch",
        c197_concurrent_touches,
    ),
    check(
        GROUP,
        "C-198",
        "get_partition_log_epoch does not refresh activity",
        c198_get_epoch_no_refresh,
    ),
];

fn record(client_id: &str, cursor: i64, updated_at_ms: i64) -> ClientRecord {
    ClientRecord {
        client_id: client_id.to_owned(),
        actor_id: "actor-1".to_owned(),
        wire_version: 2,
        cursor,
        updated_at_ms,
        subscriptions: Vec::new(),
    }
}

fn get(storage: &dyn ServerStorage, partition: &str, client_id: &str) -> CheckResult<ClientRecord> {
    storage
        .get_client_record(partition, client_id)?
        .ok_or_else(|| Failure::new(format!("client record {client_id} missing")))
}

fn entry(storage: &dyn ServerStorage, partition: &str) -> CheckResult<PartitionRegistryEntry> {
    storage
        .list_partition_registry()?
        .into_iter()
        .find(|e| e.partition == partition)
        .ok_or_else(|| Failure::new(format!("registry entry of {partition} missing")))
}

fn c187_client_record_round_trip(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let mut first = record("client-1", 7, NOW);
    first.wire_version = 3;
    first.subscriptions = vec![
        ClientSubscription {
            id: "sub-1".to_owned(),
            table: "tasks".to_owned(),
            scopes: filter(&[("project_id", &["p1", "p2"])]),
        },
        ClientSubscription {
            id: "sub-2".to_owned(),
            table: "docs".to_owned(),
            scopes: filter(&[("org_id", &["o1"]), ("project_id", &["p1"])]),
        },
    ];
    storage.put_client_record(P, &first)?;
    check_eq!(
        get(storage.as_ref(), P, "client-1")?,
        first,
        "record after put"
    );
    let mut second = record("client-1", 3, NOW + 10);
    second.actor_id = "actor-2".to_owned();
    second.subscriptions = vec![ClientSubscription {
        id: "sub-3".to_owned(),
        table: "secrets".to_owned(),
        scopes: filter(&[("project_id", &["p9"])]),
    }];
    storage.put_client_record(P, &second)?;
    check_eq!(
        get(storage.as_ref(), P, "client-1")?,
        second,
        "record after re-put"
    );
    Ok(())
}

fn c188_list_client_cursors(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    for (id, cursor, at) in [("c", 3, NOW + 3), ("a", 1, NOW + 1), ("b", -1, NOW + 2)] {
        storage.put_client_record(P, &record(id, cursor, at))?;
    }
    storage.put_client_record("part-2", &record("0", 9, NOW))?;
    let info = |client_id: &str, cursor, updated_at_ms| ClientCursorInfo {
        client_id: client_id.to_owned(),
        cursor,
        updated_at_ms,
    };
    check_eq!(
        storage.list_client_cursors(P)?,
        vec![
            info("a", 1, NOW + 1),
            info("b", -1, NOW + 2),
            info("c", 3, NOW + 3)
        ],
        "list_client_cursors"
    );
    Ok(())
}

fn c189_advance_cursor_maxima(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    touch(storage.as_ref(), P)?;
    storage.put_client_record(P, &record("client-1", 10, NOW))?;
    check!(
        storage.advance_client_cursor(P, "client-1", "actor-1", EPOCH, 5, NOW + 100)?,
        "advance with matching actor and epoch returned false"
    );
    let after = get(storage.as_ref(), P, "client-1")?;
    check_eq!(
        (after.cursor, after.updated_at_ms),
        (10, NOW + 100),
        "cursor and time after a lower cursor"
    );
    check!(
        storage.advance_client_cursor(P, "client-1", "actor-1", EPOCH, 20, NOW + 50)?,
        "second advance returned false"
    );
    let after = get(storage.as_ref(), P, "client-1")?;
    check_eq!(
        (after.cursor, after.updated_at_ms),
        (20, NOW + 100),
        "cursor and time after an older time"
    );
    Ok(())
}

fn c190_advance_cursor_guards(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    touch(storage.as_ref(), P)?;
    let original = record("client-1", 10, NOW);
    storage.put_client_record(P, &original)?;
    let cases = [
        ("wrong actor", "client-1", "actor-9", EPOCH),
        ("wrong epoch", "client-1", "actor-1", "epoch-9"),
        ("missing record", "client-9", "actor-1", EPOCH),
    ];
    for (what, client_id, actor, epoch) in cases {
        check!(
            !storage.advance_client_cursor(P, client_id, actor, epoch, 50, NOW + 100)?,
            "advance with {what} returned true"
        );
        check_eq!(
            get(storage.as_ref(), P, "client-1")?,
            original,
            "record after advance with {what}"
        );
    }
    check!(
        storage.get_client_record(P, "client-9")?.is_none(),
        "advance created a missing record"
    );
    Ok(())
}

fn c191_update_missing_record(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    check!(
        !storage.update_client_cursor(P, "client-1", 5, NOW)?,
        "update_client_cursor on a missing record returned true"
    );
    check!(
        storage.get_client_record(P, "client-1")?.is_none(),
        "the record was created"
    );
    Ok(())
}

fn c192_active_cursor_floor(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let floor = |cutoff| storage.get_active_client_cursor_floor(P, cutoff);
    check_eq!(floor(NOW)?, None, "floor without records");
    storage.put_client_record(P, &record("old", 5, NOW - 10))?;
    check_eq!(
        floor(NOW)?,
        None,
        "floor when every record is older than the cutoff"
    );
    storage.put_client_record(P, &record("at-cutoff", 7, NOW))?;
    check_eq!(
        floor(NOW)?,
        Some(7),
        "floor with a record exactly at the cutoff"
    );
    storage.put_client_record("part-2", &record("other", 1, NOW + 1))?;
    check_eq!(floor(NOW)?, Some(7), "floor ignoring other partitions");
    storage.put_client_record(P, &record("bootstrapping", -1, NOW + 5))?;
    check_eq!(floor(NOW)?, Some(-1), "floor with a cursor of -1");
    Ok(())
}

fn c193_list_partitions(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    check_eq!(
        storage.list_partitions()?,
        Vec::<String>::new(),
        "fresh list_partitions"
    );
    storage.touch_partition("b", NOW, EPOCH)?;
    storage.touch_partition("a", NOW, EPOCH)?;
    check_eq!(storage.list_partitions()?, ["a", "b"], "list_partitions");
    Ok(())
}

fn c194_touch_keeps_epoch(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    storage.touch_partition(P, NOW, EPOCH)?;
    let second = storage.touch_partition(P, NOW + 500, "epoch-other")?;
    let expected = PartitionRegistryEntry {
        partition: P.to_owned(),
        log_epoch: EPOCH.to_owned(),
        epoch_required: false,
        last_authenticated_at_ms: NOW + 500,
    };
    check_eq!(second, expected, "entry returned by the second touch");
    check_eq!(
        entry(storage.as_ref(), P)?,
        expected,
        "stored registry entry"
    );
    Ok(())
}

fn c195_empty_epoch(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.touch_partition(P, NOW, ""),
        ErrorCode::InvalidLogEpoch,
        "touch with an empty epoch",
    )?;
    storage.touch_partition(P, NOW, EPOCH)?;
    expect_code(
        storage.rotate_partition_log_epoch(P, "", NOW + 1),
        ErrorCode::InvalidLogEpoch,
        "rotate with an empty epoch",
    )?;
    check_eq!(
        storage.get_partition_log_epoch(P)?.as_deref(),
        Some(EPOCH),
        "epoch after refused rotation"
    );
    Ok(())
}

fn c196_rotate(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    storage.touch_partition(P, NOW, EPOCH)?;
    storage.touch_partition("part-2", NOW, EPOCH)?;
    storage.put_client_record(P, &record("c1", 1, NOW))?;
    storage.put_client_record(P, &record("c2", 2, NOW))?;
    storage.put_client_record("part-2", &record("c3", 3, NOW))?;
    let rotated = storage.rotate_partition_log_epoch(P, "epoch-2", NOW + 100)?;
    let expected = PartitionRegistryEntry {
        partition: P.to_owned(),
        log_epoch: "epoch-2".to_owned(),
        epoch_required: true,
        last_authenticated_at_ms: NOW + 100,
    };
    check_eq!(rotated, expected, "entry returned by rotate");
    check_eq!(
        entry(storage.as_ref(), P)?,
        expected,
        "stored registry entry"
    );
    check!(
        storage.list_client_cursors(P)?.is_empty(),
        "client records of the rotated partition remain"
    );
    check!(
        storage.get_client_record(P, "c1")?.is_none(),
        "client c1 remains"
    );
    check_eq!(
        get(storage.as_ref(), "part-2", "c3")?.cursor,
        3,
        "client of another partition"
    );
    Ok(())
}

fn c197_concurrent_touches(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let first = ctx.ensured(&schema)?;
    let second = ctx.ensured(&schema)?;
    let barrier = Barrier::new(2);
    let (a, b) = thread::scope(|s| {
        let a = s.spawn(|| {
            barrier.wait();
            first.touch_partition(P, NOW, "epoch-a")
        });
        let b = s.spawn(|| {
            barrier.wait();
            second.touch_partition(P, NOW, "epoch-b")
        });
        (a.join(), b.join())
    });
    let (a, b) = (joined(a)??, joined(b)??);
    check_eq!(
        a.log_epoch,
        b.log_epoch,
        "epochs returned by the two touches"
    );
    check!(
        a.log_epoch == "epoch-a" || a.log_epoch == "epoch-b",
        "persisted epoch {:?} is neither caller's",
        a.log_epoch
    );
    check_eq!(
        first.get_partition_log_epoch(P)?,
        Some(a.log_epoch.clone()),
        "stored epoch"
    );
    Ok(())
}

fn c198_get_epoch_no_refresh(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    check_eq!(
        storage.get_partition_log_epoch(P)?,
        None,
        "epoch of an unregistered partition"
    );
    storage.touch_partition(P, NOW, EPOCH)?;
    ctx.clock.advance(1_000);
    check_eq!(
        storage.get_partition_log_epoch(P)?.as_deref(),
        Some(EPOCH),
        "epoch"
    );
    check_eq!(
        entry(storage.as_ref(), P)?.last_authenticated_at_ms,
        NOW,
        "last_authenticated_at_ms after the read"
    );
    Ok(())
}
