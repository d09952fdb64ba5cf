//! Workspace-level integration tests live in `tests/tests/`; this library only anchors the package.
