//! `REQ_HEADER` (§1.5) and `RESP_HEADER` (§1.6).

use crate::envelope::WireVersion;
use crate::error::{DecodeError, EncodeError};
use crate::primitives::{put_bool, put_i32, put_opt, put_str, Reader};

/// The first frame of every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReqHeader {
    /// The stable per-device id; never empty.
    pub client_id: String,
    /// The client's generated schema version; at least 1.
    pub schema_version: i32,
    /// Wire versions 2 and 3 only: the partition log epoch the client last
    /// accepted, never empty; `None` asks for epoch acquisition. Must be
    /// `None` in a version 1 message.
    pub log_epoch: Option<String>,
}

const EMPTY_CLIENT_ID: &str = "REQ_HEADER.clientId must not be empty";
const LOW_SCHEMA_VERSION: &str = "REQ_HEADER.schemaVersion must be at least 1";
const EMPTY_REQ_EPOCH: &str = "REQ_HEADER.logEpoch must not be empty when present";
const EMPTY_RESP_EPOCH: &str = "RESP_HEADER.logEpoch must not be empty";

impl ReqHeader {
    pub(crate) fn decode(r: &mut Reader<'_>, version: WireVersion) -> Result<Self, DecodeError> {
        let client_id = r.str("REQ_HEADER.clientId")?;
        if client_id.is_empty() {
            return Err(DecodeError::Constraint {
                rule: EMPTY_CLIENT_ID,
            });
        }
        let schema_version = r.i32("REQ_HEADER.schemaVersion")?;
        if schema_version < 1 {
            return Err(DecodeError::Constraint {
                rule: LOW_SCHEMA_VERSION,
            });
        }
        let log_epoch = match version {
            WireVersion::V1 => None,
            WireVersion::V2 | WireVersion::V3 => {
                r.opt("REQ_HEADER.logEpoch", |r| r.str("REQ_HEADER.logEpoch"))?
            }
        };
        if log_epoch.as_deref() == Some("") {
            return Err(DecodeError::Constraint {
                rule: EMPTY_REQ_EPOCH,
            });
        }
        Ok(Self {
            client_id,
            schema_version,
            log_epoch,
        })
    }

    pub(crate) fn encode(
        &self,
        out: &mut Vec<u8>,
        version: WireVersion,
    ) -> Result<(), EncodeError> {
        if self.client_id.is_empty() {
            return Err(EncodeError::Constraint {
                rule: EMPTY_CLIENT_ID,
            });
        }
        if self.schema_version < 1 {
            return Err(EncodeError::Constraint {
                rule: LOW_SCHEMA_VERSION,
            });
        }
        if self.log_epoch.as_deref() == Some("") {
            return Err(EncodeError::Constraint {
                rule: EMPTY_REQ_EPOCH,
            });
        }
        put_str(out, &self.client_id, "REQ_HEADER.clientId")?;
        put_i32(out, self.schema_version);
        match version {
            WireVersion::V1 if self.log_epoch.is_some() => Err(EncodeError::VersionMismatch {
                what: "REQ_HEADER.logEpoch",
            }),
            WireVersion::V1 => Ok(()),
            WireVersion::V2 | WireVersion::V3 => put_opt(out, self.log_epoch.as_ref(), |o, v| {
                put_str(o, v, "REQ_HEADER.logEpoch")
            }),
        }
    }
}

/// The first frame of every response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RespHeader {
    /// Present when the client's schema version is no longer served.
    pub required_schema_version: Option<i32>,
    /// Informational: the newest schema version the server knows.
    pub latest_schema_version: Option<i32>,
    /// Wire versions 2 and 3 only (and then required): the partition log
    /// epoch.
    pub epoch: Option<ResponseEpoch>,
}

/// The part of `RESP_HEADER` that wire versions 2 and 3 carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseEpoch {
    /// The current partition log identity; never empty.
    pub log_epoch: String,
    /// Whether the client must run the log reset before its next round.
    pub reset_required: bool,
}

impl RespHeader {
    pub(crate) fn decode(r: &mut Reader<'_>, version: WireVersion) -> Result<Self, DecodeError> {
        let required_schema_version = r.opt("RESP_HEADER.requiredSchemaVersion", |r| {
            r.i32("RESP_HEADER.requiredSchemaVersion")
        })?;
        let latest_schema_version = r.opt("RESP_HEADER.latestSchemaVersion", |r| {
            r.i32("RESP_HEADER.latestSchemaVersion")
        })?;
        let epoch = match version {
            WireVersion::V1 => None,
            WireVersion::V2 | WireVersion::V3 => {
                let log_epoch = r.str("RESP_HEADER.logEpoch")?;
                if log_epoch.is_empty() {
                    return Err(DecodeError::Constraint {
                        rule: EMPTY_RESP_EPOCH,
                    });
                }
                Some(ResponseEpoch {
                    log_epoch,
                    reset_required: r.bool("RESP_HEADER.resetRequired")?,
                })
            }
        };
        Ok(Self {
            required_schema_version,
            latest_schema_version,
            epoch,
        })
    }

    pub(crate) fn encode(
        &self,
        out: &mut Vec<u8>,
        version: WireVersion,
    ) -> Result<(), EncodeError> {
        put_opt(out, self.required_schema_version.as_ref(), |o, v| {
            put_i32(o, *v);
            Ok(())
        })?;
        put_opt(out, self.latest_schema_version.as_ref(), |o, v| {
            put_i32(o, *v);
            Ok(())
        })?;
        match (version, &self.epoch) {
            (WireVersion::V1, None) => Ok(()),
            (WireVersion::V2 | WireVersion::V3, Some(epoch)) if epoch.log_epoch.is_empty() => {
                Err(EncodeError::Constraint {
                    rule: EMPTY_RESP_EPOCH,
                })
            }
            (WireVersion::V2 | WireVersion::V3, Some(epoch)) => {
                put_str(out, &epoch.log_epoch, "RESP_HEADER.logEpoch")?;
                put_bool(out, epoch.reset_required);
                Ok(())
            }
            _ => Err(EncodeError::VersionMismatch {
                what: "RESP_HEADER.logEpoch",
            }),
        }
    }
}
