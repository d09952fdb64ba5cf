//! What the routes share.

use std::sync::Arc;

use sync_wire::realtime::RealtimeHub;
use sync_wire::WireService;
use tokio::sync::Semaphore;

use crate::auth::Authenticator;
use crate::config::HttpConfig;

/// The service, the authenticator, the limits and the round slots behind
/// [`crate::router`]. Cheap to clone.
#[derive(Clone)]
pub struct SyncState {
    pub(crate) service: Arc<WireService>,
    pub(crate) auth: Arc<dyn Authenticator>,
    pub(crate) config: Arc<HttpConfig>,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) realtime: Option<Arc<RealtimeHub>>,
}

impl std::fmt::Debug for SyncState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncState")
            .field("config", &self.config)
            .field("free_slots", &self.slots.available_permits())
            .finish_non_exhaustive()
    }
}

impl SyncState {
    /// Routes serving `service` to callers `auth` identifies, within
    /// `config`'s limits.
    pub fn new(
        service: Arc<WireService>,
        auth: Arc<dyn Authenticator>,
        config: HttpConfig,
    ) -> Self {
        let slots = Arc::new(Semaphore::new(config.max_concurrent_rounds.max(1)));
        Self {
            service,
            auth,
            config: Arc::new(config),
            slots,
            realtime: None,
        }
    }

    /// Serves `GET /realtime` (SSP2 §8) through `hub`, and fans out the
    /// commits of every `POST /sync` round to its connections. The hub
    /// must serve the same [`WireService`].
    pub fn with_realtime(mut self, hub: Arc<RealtimeHub>) -> Self {
        self.realtime = Some(hub);
        self
    }

    /// The realtime hub, when realtime is served.
    pub fn realtime(&self) -> Option<&Arc<RealtimeHub>> {
        self.realtime.as_ref()
    }

    /// The wire service.
    pub fn service(&self) -> &Arc<WireService> {
        &self.service
    }

    /// Round slots free right now.
    pub fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }

    /// Waits until no round or download is running (every slot free), then
    /// returns; for graceful shutdowns and tests.
    pub async fn idle(&self) {
        let all = u32::try_from(self.config.max_concurrent_rounds.max(1)).unwrap_or(u32::MAX);
        if let Ok(permits) = self.slots.acquire_many(all).await {
            drop(permits);
        }
    }
}
