//! The Postgres dialect of the syncstore storage layer.
