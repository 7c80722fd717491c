//! Where a server stands, for the runtime that starts servers and for the health snapshots
//! (`fleet::Health`) that report them: one type, in a module of its own so that neither of
//! the two needs the other for it.

/// Where a server stands; health snapshots (`fleet::Health`) use the same states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Not started yet (optional servers wait for the first use of MCP).
    Idle,
    /// Connecting now.
    Starting,
    Ready,
    /// It needs an OAuth authorization that this surface cannot run.
    Unauthenticated,
    /// A credential variable is not set.
    MissingVariable(String),
    Failed(String),
    Disabled,
}

impl State {
    pub fn label(&self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Starting => "starting",
            State::Ready => "ready",
            State::Unauthenticated => "unauthenticated",
            State::MissingVariable(_) => "failed",
            State::Failed(_) => "failed",
            State::Disabled => "disabled",
        }
    }
}
