//! Optional capability groups (`storage-contract.md` §8).

/// Which optional method groups a storage implements. A group is
/// all-or-nothing; the dialects of this workspace advertise all five.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Durable reactions (§4.10).
    pub reactions: bool,
    /// Blob reference index (§4.11, `set_blob_refs`).
    pub blob_refs: bool,
    /// Admin read surface (§4.12).
    pub admin: bool,
    /// Registered queries (§4.13).
    pub authoritative_query: bool,
    /// Trusted index lookups (`scan_rows_by_index`).
    pub index_scan: bool,
}

impl Capabilities {
    /// Every capability.
    pub const ALL: Capabilities = Capabilities {
        reactions: true,
        blob_refs: true,
        admin: true,
        authoritative_query: true,
        index_scan: true,
    };
}

/// Names of the capability groups, as used in `details.capability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// `Reactions`.
    Reactions,
    /// `BlobRefs`.
    BlobRefs,
    /// `Admin`.
    Admin,
    /// `AuthoritativeQuery`.
    AuthoritativeQuery,
    /// `IndexScan`.
    IndexScan,
}

impl Capability {
    /// The group name.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Reactions => "Reactions",
            Capability::BlobRefs => "BlobRefs",
            Capability::Admin => "Admin",
            Capability::AuthoritativeQuery => "AuthoritativeQuery",
            Capability::IndexScan => "IndexScan",
        }
    }

    /// `sync.storage.capability_unsupported` for this group.
    pub fn unsupported(self) -> crate::Error {
        crate::Error::new(crate::ErrorCode::CapabilityUnsupported)
            .detail("capability", self.as_str())
    }
}
