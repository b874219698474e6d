//! `session.prompt` is served by the agent ([`crate::agent::prompt`]): the prompt is queued as a
//! run, the session's worker stores the user's message when the run starts, and the run loop
//! streams the model's answer as events of this session.
