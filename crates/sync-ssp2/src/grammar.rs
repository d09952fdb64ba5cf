//! The frame grammars of requests (§1.5) and responses (§1.6) as small
//! state machines, fed one frame type at a time. The decoder, the one-shot
//! encoders and the incremental writer share them, so a message is legal
//! to write exactly when it is legal to read.
//!
//! Unknown frames are transparent to the ordering rules, except that one
//! can be neither the first frame nor follow `ERROR`, and that one after
//! `RESP_HEADER` closes the place of `LEASE` (§1.6: immediately after the
//! header).
//!
//! A `PUSH_RESULT_DETAILS` is also checked against the `PUSH_RESULT` it
//! completes (§6.3.1): that needs the two frames' contents, which the
//! caller hands over with [`ResponseGrammar::contents`] once the frame is
//! decoded (or before it is written).

use crate::frames::types::*;
use crate::frames::{OpResultKind, PushResult, PushResultDetails, PushStatus};
use crate::response::ResponseFrame;

type Rule = &'static str;

/// Where a request is in its grammar.
#[derive(Debug, Default)]
pub(crate) struct RequestGrammar {
    header: bool,
    pull: bool,
    pushes: usize,
}

const REQ_FIRST: Rule = "a request starts with REQ_HEADER";

impl RequestGrammar {
    /// Accepts a known request frame type.
    pub(crate) fn frame(&mut self, frame_type: u8) -> Result<(), Rule> {
        if !self.header {
            if frame_type == REQ_HEADER {
                self.header = true;
                return Ok(());
            }
            return Err(REQ_FIRST);
        }
        match frame_type {
            REQ_HEADER => Err("REQ_HEADER appears once"),
            PUSH_COMMIT if self.pull => Err("PUSH_COMMIT frames come before PULL_HEADER"),
            PUSH_COMMIT => {
                self.pushes += 1;
                Ok(())
            }
            PULL_HEADER if self.pull => Err("PULL_HEADER appears at most once"),
            PULL_HEADER => {
                self.pull = true;
                Ok(())
            }
            SUBSCRIPTION if !self.pull => Err("SUBSCRIPTION frames need a PULL_HEADER before them"),
            _ => Ok(()),
        }
    }

    /// Accepts an unknown frame.
    pub(crate) fn unknown(&mut self) -> Result<(), Rule> {
        if self.header {
            Ok(())
        } else {
            Err(REQ_FIRST)
        }
    }

    /// Accepts the end of the message.
    pub(crate) fn end(&self) -> Result<(), Rule> {
        if !self.header {
            Err(REQ_FIRST)
        } else if self.pushes == 0 && !self.pull {
            Err("a request carries at least one PUSH_COMMIT or a PULL_HEADER")
        } else {
            Ok(())
        }
    }
}

/// Where a response is in its grammar.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResponseGrammar {
    header: bool,
    lease_allowed: bool,
    after_push_result: bool,
    subscriptions_begun: bool,
    in_section: bool,
    section_has_commit: bool,
    section_has_segment: bool,
    errored: bool,
    last_rejection: Option<Rejection>,
}

/// What a `PUSH_RESULT_DETAILS` is checked against: the rejected
/// `PUSH_RESULT` just before it. Held only between the two frames.
#[derive(Debug, Clone)]
struct Rejection {
    client_commit_id: String,
    error_ops: Vec<i32>,
}

impl Rejection {
    fn of(result: &PushResult) -> Option<Self> {
        if !matches!(result.status, PushStatus::Rejected) {
            return None;
        }
        let mut error_ops: Vec<i32> = result
            .results
            .iter()
            .filter(|r| matches!(r.kind, OpResultKind::Error { .. }))
            .map(|r| r.op_index)
            .collect();
        // Sorted, so checking every entry stays O(n log n) however many
        // records and entries a message carries.
        error_ops.sort_unstable();
        Some(Self {
            client_commit_id: result.client_commit_id.clone(),
            error_ops,
        })
    }

    fn completed_by(&self, details: &PushResultDetails) -> Result<(), Rule> {
        if details.client_commit_id != self.client_commit_id {
            Err("PUSH_RESULT_DETAILS names the clientCommitId of the PUSH_RESULT before it")
        } else if details
            .entries
            .iter()
            .any(|e| self.error_ops.binary_search(&e.op_index).is_err())
        {
            Err("PUSH_RESULT_DETAILS entries name error records of the PUSH_RESULT before it")
        } else {
            Ok(())
        }
    }
}

const RESP_FIRST: Rule = "a response starts with RESP_HEADER";
const AFTER_ERROR: Rule = "only END may follow ERROR";
const DETAILS_PLACE: Rule = "PUSH_RESULT_DETAILS immediately follows a PUSH_RESULT";
const MIXED: Rule = "a subscription section mixes COMMIT and segment frames";

impl ResponseGrammar {
    /// Accepts a known response frame type.
    pub(crate) fn frame(&mut self, frame_type: u8) -> Result<(), Rule> {
        if self.errored {
            return Err(AFTER_ERROR);
        }
        if !self.header {
            if frame_type == RESP_HEADER {
                self.header = true;
                self.lease_allowed = true;
                return Ok(());
            }
            return Err(RESP_FIRST);
        }
        let lease_allowed = std::mem::replace(&mut self.lease_allowed, false);
        let after_push_result = std::mem::replace(&mut self.after_push_result, false);
        if frame_type != PUSH_RESULT_DETAILS {
            self.last_rejection = None;
        }
        match frame_type {
            RESP_HEADER => return Err("RESP_HEADER appears once"),
            LEASE if !lease_allowed => {
                return Err("LEASE appears at most once, right after RESP_HEADER")
            }
            PUSH_RESULT if self.subscriptions_begun => {
                return Err("PUSH_RESULT frames come before the subscription sections")
            }
            PUSH_RESULT => self.after_push_result = true,
            PUSH_RESULT_DETAILS if !after_push_result => return Err(DETAILS_PLACE),
            SUB_START if self.in_section => return Err("subscription sections do not nest"),
            SUB_START => {
                self.in_section = true;
                self.subscriptions_begun = true;
                self.section_has_commit = false;
                self.section_has_segment = false;
            }
            COMMIT | SEGMENT_REF | SEGMENT_INLINE | SUB_END if !self.in_section => {
                return Err("COMMIT, SEGMENT_REF, SEGMENT_INLINE and SUB_END belong inside a subscription section")
            }
            COMMIT if self.section_has_segment => return Err(MIXED),
            COMMIT => self.section_has_commit = true,
            SEGMENT_REF | SEGMENT_INLINE if self.section_has_commit => return Err(MIXED),
            SEGMENT_REF | SEGMENT_INLINE => self.section_has_segment = true,
            SUB_END => self.in_section = false,
            ERROR => self.errored = true,
            _ => {}
        }
        Ok(())
    }

    /// Checks the contents of a known frame already accepted by
    /// [`ResponseGrammar::frame`] against the frames before it: a
    /// `PUSH_RESULT_DETAILS` must complete the rejected `PUSH_RESULT` right
    /// before it, naming its commit and only its `error` records.
    pub(crate) fn contents(&mut self, frame: &ResponseFrame) -> Result<(), Rule> {
        match frame {
            ResponseFrame::PushResult(result) => {
                self.last_rejection = Rejection::of(result);
                Ok(())
            }
            ResponseFrame::PushResultDetails(details) => match self.last_rejection.take() {
                Some(rejection) => rejection.completed_by(details),
                None => Err("PUSH_RESULT_DETAILS completes a rejected PUSH_RESULT only"),
            },
            _ => Ok(()),
        }
    }

    /// Accepts an unknown frame.
    pub(crate) fn unknown(&mut self) -> Result<(), Rule> {
        if self.errored {
            Err(AFTER_ERROR)
        } else if !self.header {
            Err(RESP_FIRST)
        } else {
            self.lease_allowed = false;
            Ok(())
        }
    }

    /// Accepts the end of the message.
    pub(crate) fn end(&self) -> Result<(), Rule> {
        if !self.header {
            Err(RESP_FIRST)
        } else if self.in_section && !self.errored {
            Err("a subscription section is left open without SUB_END")
        } else {
            Ok(())
        }
    }
}
