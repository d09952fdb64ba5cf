//! The loopback rule: the control surface lets any caller read every row
//! and rewrite the clock, so it is served only where no other machine can
//! reach it.

use std::net::SocketAddr;

use crate::error::{CliCode, CliError, CliResult};

/// `Ok` when `address` (the bound listener's) is a loopback address;
/// `sync.cli.control_not_loopback` otherwise.
pub fn require_loopback(address: SocketAddr) -> CliResult<()> {
    if address.ip().is_loopback() {
        Ok(())
    } else {
        Err(CliError::new(CliCode::ControlNotLoopback).detail("listen", address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_pass() {
        for ok in ["127.0.0.1:1", "127.3.4.5:80", "[::1]:8080"] {
            assert!(require_loopback(ok.parse().unwrap()).is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0:1", "[::]:1", "192.168.1.2:80", "10.0.0.1:0"] {
            let error = require_loopback(refused.parse().unwrap()).unwrap_err();
            assert_eq!(error.code(), "sync.cli.control_not_loopback", "{refused}");
        }
    }
}
