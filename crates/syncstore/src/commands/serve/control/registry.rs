//! The open test instances, by id, within `--max-instances`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::create::CreateOptions;
use super::instance::Instance;
use crate::error::{CliCode, CliError, CliResult};
use crate::scratch::ScratchArea;
use crate::url::DatabaseUrl;

/// Every open instance and the area their storages live in.
#[derive(Debug)]
pub struct Control {
    area: Arc<ScratchArea>,
    instances: Mutex<BTreeMap<String, Arc<Instance>>>,
    /// Instances open or being created.
    open: AtomicUsize,
    max_instances: usize,
    next_id: AtomicU64,
}

impl Control {
    /// Instances in scratch storages of `db`'s dialect, at most
    /// `max_instances` at once.
    pub fn new(db: Option<&str>, max_instances: usize) -> CliResult<Self> {
        let url = DatabaseUrl::resolve(db)?;
        Ok(Self {
            area: Arc::new(ScratchArea::new(&url)?),
            instances: Mutex::new(BTreeMap::new()),
            open: AtomicUsize::new(0),
            max_instances,
            next_id: AtomicU64::new(0),
        })
    }

    /// Creates an instance; returns its id (`i1`, `i2`, …, never reused).
    pub(crate) fn create(&self, options: CreateOptions) -> CliResult<(String, Arc<Instance>)> {
        if self.open.fetch_add(1, Ordering::SeqCst) >= self.max_instances {
            self.open.fetch_sub(1, Ordering::SeqCst);
            return Err(CliError::new(CliCode::ControlInstanceLimit)
                .detail("max_instances", self.max_instances));
        }
        let instance = match Instance::create(options, self.area.clone()) {
            Ok(instance) => Arc::new(instance),
            Err(error) => {
                self.open.fetch_sub(1, Ordering::SeqCst);
                return Err(error);
            }
        };
        let id = format!("i{}", self.next_id.fetch_add(1, Ordering::SeqCst) + 1);
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), instance.clone());
        Ok((id, instance))
    }

    /// The open instance `id`.
    pub(crate) fn get(&self, id: &str) -> CliResult<Arc<Instance>> {
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
            .ok_or_else(|| unknown(id))
    }

    /// Closes instance `id` and frees its storage.
    pub(crate) fn close(&self, id: &str) -> CliResult<()> {
        let instance = self
            .instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
            .ok_or_else(|| unknown(id))?;
        instance.close();
        self.open.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }

    /// Closes every instance (at exit).
    pub fn close_all(&self) {
        let all = std::mem::take(
            &mut *self
                .instances
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for instance in all.into_values() {
            instance.close();
            self.open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn unknown(id: &str) -> CliError {
    CliError::new(CliCode::ControlUnknownInstance).detail("instance", id)
}
