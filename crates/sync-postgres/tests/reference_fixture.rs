//! Acceptance test on databases written by the reference implementation
//! (every set of `shared/fixtures/reference-0.15`, or of the directory named
//! by `SYNCSTORE_FIXTURES`), each dump restored into a fresh schema: the
//! dialect-agnostic checks of `sync_conformance::reference` (reads back
//! exactly, bumps to v2 like the reference, takes new commits, declared
//! indexes rebuilt in their partition-leading form, read here from
//! `pg_index`), plus what only Postgres can say: the key columns converted
//! to `COLLATE "C"`. A missing fixture fails the test; it never skips.

mod common;

use common::*;
use postgres::Client;
use sync_conformance::reference::{self, assert_passes, IndexCatalog, Manifest};
use sync_conformance::{CheckResult, RawIndex};
use sync_core::{CompiledSchema, EnsureOptions, ServerStorage};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/reference-0.15"
);

/// Every set of the fixture directory, each restored into its own schema.
fn restores() -> Vec<(Manifest, TestDb)> {
    assert_passes(reference::manifests(FIXTURES))
        .into_iter()
        .map(|manifest| {
            let db = TestDb::new();
            let dump = assert_passes(manifest.file("postgres"));
            sync_postgres::reference_dump::load_into_schema(&pg_url(), &db.schema, &dump)
                .unwrap_or_else(|e| panic!("restore {}: {e:?}", dump.display()));
            (manifest, db)
        })
        .collect()
}

/// Every key column — the two of each application table and the *K*
/// columns of the internal tables — is `COLLATE "C"`.
fn assert_keys_collate_c(raw: &mut Client, schema: &CompiledSchema) {
    let mut keys: Vec<(String, String)> = schema
        .tables
        .iter()
        .flat_map(|t| {
            [
                (t.name.clone(), "_sync_partition".to_owned()),
                (t.name.clone(), "_sync_row_id".to_owned()),
            ]
        })
        .collect();
    for (table, columns) in sync_schema::INTERNAL_KEY_COLUMNS {
        keys.extend(
            columns
                .iter()
                .map(|c| ((*table).to_owned(), (*c).to_owned())),
        );
    }
    for (table, column) in keys {
        let collation: Option<String> = raw
            .query_one(
                "SELECT CASE WHEN a.attcollation = 100 THEN NULL ELSE co.collname::text END \
                 FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation \
                 WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attname = $2",
                &[&table, &column],
            )
            .unwrap_or_else(|e| panic!("{table}.{column}: {e}"))
            .get(0);
        assert_eq!(
            collation.as_deref(),
            Some("C"),
            "{table}.{column} converted to COLLATE \"C\""
        );
    }
}

/// Postgres's catalog: `pg_index`, with key columns in `indkey` order.
struct Catalog(Client);

impl IndexCatalog for Catalog {
    fn indexes(&mut self, table: &str) -> CheckResult<Vec<RawIndex>> {
        let rows = self
            .0
            .query(
                "SELECT ic.relname::text, ix.indisunique, ARRAY( \
                   SELECT a.attname::text FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, n) \
                   JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum \
                   ORDER BY k.n) \
                 FROM pg_index ix JOIN pg_class ic ON ic.oid = ix.indexrelid \
                 WHERE ix.indrelid = to_regclass(quote_ident($1)) AND NOT ix.indisprimary",
                &[&table],
            )
            .unwrap();
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }
}

#[test]
fn reference_database_opens_upgrades_and_reads_back_exactly() {
    for (manifest, db) in restores() {
        let storage = db.open();
        assert_passes(reference::check_reads_back(&storage, &manifest));
        let mut raw = db.raw();
        assert_keys_collate_c(&mut raw, manifest.schema());
        assert_passes(reference::check_indexes_rebuilt(
            &mut Catalog(raw),
            &manifest,
            sync_postgres::DIALECT,
        ));
        assert_passes(reference::check_takes_new_commits(&storage, &manifest));

        // a second instance starts warm: same version, nothing left to upgrade
        db.open()
            .ensure_schema(manifest.schema(), &EnsureOptions::default())
            .expect("warm ensure");
    }
}

#[test]
fn reference_database_bumps_to_v2_like_the_reference() {
    for (manifest, db) in restores() {
        let storage = db.open();
        assert_passes(reference::check_upgrade(&storage, &manifest));
        assert_passes(reference::check_takes_new_commits(&storage, &manifest));
        let mut raw = db.raw();
        assert_keys_collate_c(&mut raw, assert_passes(manifest.schema_v2()));
        assert_passes(reference::check_indexes_after_upgrade(
            &mut Catalog(raw),
            &manifest,
            sync_postgres::DIALECT,
        ));
    }
}
