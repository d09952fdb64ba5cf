//! The frame grammars of requests (§1.5) and responses (§1.6) as small
//! state machines, fed one frame type at a time. The decoder, the one-shot
//! encoders and the incremental writer share them, so a message is legal
//! to write exactly when it is legal to read.
//!
//! Unknown frames are transparent to the ordering rules, except that one
//! can be neither the first frame nor follow `ERROR`, and that one after
//! `RESP_HEADER` closes the place of `LEASE` (§1.6: immediately after the
//! header).

use crate::frames::types::*;

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
}

const RESP_FIRST: Rule = "a response starts with RESP_HEADER";
const AFTER_ERROR: Rule = "only END may follow ERROR";
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
        match frame_type {
            RESP_HEADER => return Err("RESP_HEADER appears once"),
            LEASE if !lease_allowed => {
                return Err("LEASE appears at most once, right after RESP_HEADER")
            }
            PUSH_RESULT if self.subscriptions_begun => {
                return Err("PUSH_RESULT frames come before the subscription sections")
            }
            PUSH_RESULT => self.after_push_result = true,
            PUSH_RESULT_DETAILS if !after_push_result => {
                return Err("PUSH_RESULT_DETAILS immediately follows a PUSH_RESULT")
            }
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
