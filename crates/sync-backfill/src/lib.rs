//! RFC 0007 checkpoint runner: backfills derived projections under live traffic.
