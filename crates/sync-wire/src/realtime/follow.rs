//! Commits of other processes (a [`CommitFeed`]): a thread that listens
//! and fans each announced commit out through the hub. A lost listener
//! wakes every socket of the process with `catchup-required` (commits may
//! have been missed: never a silent gap); once listening again, whatever
//! was committed meanwhile is fanned out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sync_core::{CommitFeed, FeedEvent};

use super::hub::RealtimeHub;

/// How long one wait for a notice lasts (the stop flag is checked between
/// waits).
const WAIT: Duration = Duration::from_millis(250);
/// How long to wait before listening again after a failure.
const RETRY: Duration = Duration::from_secs(1);

/// The listening thread; dropping it stops the thread (within a wait).
#[derive(Debug)]
pub struct Following {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl RealtimeHub {
    /// Follows `feed` on a thread of its own until the returned handle is
    /// dropped: every commit it announces is fanned out as the process's
    /// own are.
    pub fn follow(self: &Arc<Self>, feed: Arc<dyn CommitFeed>) -> std::io::Result<Following> {
        let stop = Arc::new(AtomicBool::new(false));
        let (hub, stopping) = (self.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("realtime-commit-feed".to_owned())
            .spawn(move || listen(&hub, feed.as_ref(), &stopping))?;
        Ok(Following {
            stop,
            thread: Some(thread),
        })
    }
}

fn pause(stop: &AtomicBool) {
    let mut left = RETRY;
    while !left.is_zero() && !stop.load(Ordering::Acquire) {
        let step = left.min(WAIT);
        std::thread::sleep(step);
        left -= step;
    }
}

fn listen(hub: &RealtimeHub, feed: &dyn CommitFeed, stop: &AtomicBool) {
    let mut lost = false;
    while !stop.load(Ordering::Acquire) {
        let mut listener = match feed.listen() {
            Ok(listener) => listener,
            Err(_) => {
                if !lost {
                    hub.lost_commits();
                    lost = true;
                }
                pause(stop);
                continue;
            }
        };
        if std::mem::take(&mut lost) {
            hub.catch_up_all();
        }
        while !stop.load(Ordering::Acquire) {
            match listener.next(WAIT) {
                FeedEvent::Commit(notice) => {
                    // A failed fanout read leaves the seq for the next notice.
                    let _ = hub.notify(&notice.partition, notice.commit_seq);
                }
                FeedEvent::Idle => {}
                FeedEvent::Lost => {
                    hub.lost_commits();
                    lost = true;
                    break;
                }
            }
        }
    }
}
