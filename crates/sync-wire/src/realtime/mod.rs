//! Realtime (SSP2 §8) without a socket: the connections of a process, the
//! fanout of commits to them and the round framing of the channel. A
//! transport (`sync-http`) owns the sockets and calls in from blocking
//! threads.

mod acks;
mod config;
mod follow;
mod hub;
mod presence;
mod round;

pub use config::RealtimeConfig;
pub use follow::Following;
pub use hub::{wake_text, Connection, FanoutReport, Outbox, Outgoing, RealtimeHub};
pub use presence::PublishOutcome;
pub use round::{refusal_stream, SocketRound};
