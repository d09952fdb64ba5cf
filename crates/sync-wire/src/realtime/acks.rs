//! Acks are persisted off the socket's path: the hub applies an ack to the
//! connection at once (suppression, unacked count) and hands the cursor to
//! one writer thread, which keeps only the newest cursor per client and
//! writes it through [`Engine::acknowledge`](sync_engine::Engine::acknowledge).
//! A burst of acks after a fanout to many sockets then costs one storage
//! connection, not the pool, and never delays the next push.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sync_engine::RequestContext;

use super::hub::lock;
use crate::service::WireService;

struct Pending {
    ctx: RequestContext,
    epoch: String,
    cursor: i64,
}

#[derive(Default)]
struct Queue {
    /// By (partition, client id): the newest cursor only.
    acks: HashMap<(String, String), Pending>,
    closed: bool,
}

/// The writer thread and its queue; dropping it writes what is queued and
/// stops the thread.
pub(super) struct AckWriter {
    shared: Arc<(Mutex<Queue>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AckWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckWriter").finish_non_exhaustive()
    }
}

impl AckWriter {
    pub(super) fn start(service: Arc<WireService>) -> Self {
        let shared = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
        let queue = shared.clone();
        let thread = std::thread::Builder::new()
            .name("realtime-acks".to_owned())
            .spawn(move || write(&service, &queue))
            .ok();
        Self { shared, thread }
    }

    /// Queues `cursor` for the client (replacing an older queued one).
    pub(super) fn push(&self, ctx: &RequestContext, client_id: &str, epoch: &str, cursor: i64) {
        let (queue, ready) = &*self.shared;
        let mut queue = lock(queue);
        let key = (ctx.partition.clone(), client_id.to_owned());
        match queue.acks.get_mut(&key) {
            Some(pending) if pending.epoch == epoch => pending.cursor = pending.cursor.max(cursor),
            _ => {
                queue.acks.insert(
                    key,
                    Pending {
                        ctx: ctx.clone(),
                        epoch: epoch.to_owned(),
                        cursor,
                    },
                );
            }
        }
        ready.notify_one();
    }
}

impl Drop for AckWriter {
    fn drop(&mut self) {
        let (queue, ready) = &*self.shared;
        lock(queue).closed = true;
        ready.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn write(service: &WireService, shared: &(Mutex<Queue>, Condvar)) {
    let (queue, ready) = shared;
    loop {
        let batch = {
            let mut guard = lock(queue);
            while guard.acks.is_empty() && !guard.closed {
                guard = match ready.wait_timeout(guard, Duration::from_secs(1)) {
                    Ok((guard, _)) => guard,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            }
            if guard.acks.is_empty() && guard.closed {
                return;
            }
            std::mem::take(&mut guard.acks)
        };
        for ((_, client_id), pending) in batch {
            // Soft state: a refused or failed write (another actor's client,
            // a rotated epoch, an outage) leaves the record as it was; the
            // client's next ack or pull moves it.
            let _ = service.engine().acknowledge(
                &pending.ctx,
                &client_id,
                &pending.epoch,
                pending.cursor,
            );
        }
    }
}
