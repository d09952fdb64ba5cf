//! The harness of the scenario tests: databases, the `syncstore` binary,
//! the server process, the reference client and raw HTTP.
#![allow(dead_code, unused_imports)]

pub mod binary;
pub mod client;
pub mod control;
pub mod db;
pub mod http;
pub mod schema;
pub mod server;

pub use client::Client;
pub use db::Dialect;
pub use server::Server;

/// One test per dialect of a scenario function `fn name(dialect: Dialect)`
/// of the including file: `name::sqlite`, `name::postgres` and
/// `name::mariadb`.
#[macro_export]
macro_rules! scenario {
    ($name:ident) => {
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::Dialect::Sqlite)
            }
            #[test]
            fn postgres() {
                super::$name(super::Dialect::Postgres)
            }
            #[test]
            fn mariadb() {
                super::$name(super::Dialect::Mariadb)
            }
        }
    };
}
