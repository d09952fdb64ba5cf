//! The `LEASE` frame (§7.3.2).

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{put_i64, put_str, Reader};

/// An auth lease issued to the client: only its id and expiry travel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lease id the client echoes; never empty.
    pub lease_id: String,
    /// When the lease expires, epoch milliseconds.
    pub expires_at_ms: i64,
}

const EMPTY_LEASE_ID: &str = "LEASE.leaseId must not be empty";

impl Lease {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let lease_id = r.str("LEASE.leaseId")?;
        if lease_id.is_empty() {
            return Err(DecodeError::Constraint {
                rule: EMPTY_LEASE_ID,
            });
        }
        Ok(Self {
            lease_id,
            expires_at_ms: r.i64("LEASE.expiresAtMs")?,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.lease_id.is_empty() {
            return Err(EncodeError::Constraint {
                rule: EMPTY_LEASE_ID,
            });
        }
        put_str(out, &self.lease_id, "LEASE.leaseId")?;
        put_i64(out, self.expires_at_ms, "LEASE.expiresAtMs")
    }
}
