//! Row payload codec (in progress).
