//! Dialect-agnostic conformance suite for syncstore storage dialects.
