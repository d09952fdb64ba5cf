//! The harness of the version 3 scenarios: the databases, the `syncstore`
//! binary and the server process are the `interop/` workspace's own
//! (shared by path); the clients of wire version 3 and the version 2
//! driver process are this workspace's.
#![allow(dead_code, unused_imports)]

#[path = "../../../tests/support/binary.rs"]
pub mod binary;
#[path = "../../../tests/support/db.rs"]
pub mod db;
#[path = "../../../tests/support/schema.rs"]
pub mod schema;
#[path = "../../../tests/support/server.rs"]
pub mod server;

pub mod clients;
pub mod replay;
pub mod v2;

pub use clients::{Conflict, Row, V3Client};
pub use db::Dialect;
pub use server::Server;

/// One test per client release and dialect of a scenario function
/// `fn name<C: V3Client>(dialect: Dialect)`: `name::latest::sqlite`,
/// `name::latest::postgres`, `name::latest::mariadb`, and the same under
/// `name::first`.
#[macro_export]
macro_rules! scenario {
    ($name:ident) => {
        mod $name {
            mod latest {
                #[test]
                fn sqlite() {
                    super::super::$name::<$crate::support::clients::Latest>(
                        $crate::support::Dialect::Sqlite,
                    )
                }
                #[test]
                fn postgres() {
                    super::super::$name::<$crate::support::clients::Latest>(
                        $crate::support::Dialect::Postgres,
                    )
                }
                #[test]
                fn mariadb() {
                    super::super::$name::<$crate::support::clients::Latest>(
                        $crate::support::Dialect::Mariadb,
                    )
                }
            }
            mod first {
                #[test]
                fn sqlite() {
                    super::super::$name::<$crate::support::clients::First>(
                        $crate::support::Dialect::Sqlite,
                    )
                }
                #[test]
                fn postgres() {
                    super::super::$name::<$crate::support::clients::First>(
                        $crate::support::Dialect::Postgres,
                    )
                }
                #[test]
                fn mariadb() {
                    super::super::$name::<$crate::support::clients::First>(
                        $crate::support::Dialect::Mariadb,
                    )
                }
            }
        }
    };
}
