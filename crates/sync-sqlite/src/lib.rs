//! The SQLite dialect of the syncstore storage layer.
