//! MCP protocol names: method strings and the protocol versions nod speaks.

/// Method names, in one place so no request is spelled ad hoc.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const INITIALIZED: &str = "notifications/initialized";
    pub const PING: &str = "ping";
    pub const CANCELLED: &str = "notifications/cancelled";
    pub const PROGRESS: &str = "notifications/progress";
    pub const MESSAGE: &str = "notifications/message";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
    pub const TOOLS_CHANGED: &str = "notifications/tools/list_changed";
    pub const RESOURCES_LIST: &str = "resources/list";
    pub const RESOURCES_TEMPLATES: &str = "resources/templates/list";
    pub const RESOURCES_READ: &str = "resources/read";
    pub const RESOURCES_CHANGED: &str = "notifications/resources/list_changed";
    pub const PROMPTS_LIST: &str = "prompts/list";
    pub const PROMPTS_GET: &str = "prompts/get";
    pub const PROMPTS_CHANGED: &str = "notifications/prompts/list_changed";
    pub const COMPLETE: &str = "completion/complete";
    pub const ELICIT: &str = "elicitation/create";
    pub const ROOTS_LIST: &str = "roots/list";
    pub const ROOTS_CHANGED: &str = "notifications/roots/list_changed";
    /// 2026-07-28: the side-effect-free probe that replaces `initialize`.
    pub const DISCOVER: &str = "server/discover";
}

/// The `_meta` keys of 2026-07-28 requests and results.
pub mod meta {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

pub(crate) mod headers;

/// A protocol revision nod can speak: the `initialize`-era ones (legacy) and the stateless
/// 2026-07-28 (modern: every request carries its own `_meta`, no handshake).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl Version {
    /// The newest revision `initialize` negotiates.
    pub const LATEST: Version = Version::V2025_11_25;
    /// The revisions of the `initialize` handshake, newest first.
    pub const ALL: [Version; 4] =
        [Version::V2025_11_25, Version::V2025_06_18, Version::V2025_03_26, Version::V2024_11_05];
    /// The modern revision nod speaks.
    pub const MODERN: Version = Version::V2026_07_28;

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V2024_11_05 => "2024-11-05",
            Version::V2025_03_26 => "2025-03-26",
            Version::V2025_06_18 => "2025-06-18",
            Version::V2025_11_25 => "2025-11-25",
            Version::V2026_07_28 => "2026-07-28",
        }
    }

    /// Any revision nod speaks, either era.
    pub fn parse(text: &str) -> Option<Version> {
        Version::ALL.into_iter().chain([Version::MODERN]).find(|v| v.as_str() == text)
    }

    /// A revision `initialize` can negotiate.
    pub fn parse_legacy(text: &str) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// Stateless: no handshake, `_meta` on every request, `resultType` on results.
    pub fn is_modern(self) -> bool {
        self >= Version::V2026_07_28
    }

    /// JSON-RPC batches were part of 2025-03-26 only (MSG-9).
    pub fn allows_batches(self) -> bool {
        self == Version::V2025_03_26
    }

    /// Elicitation arrived in 2025-06-18; URL mode in 2025-11-25.
    pub fn has_elicitation(self) -> bool {
        self >= Version::V2025_06_18
    }

    pub fn has_url_elicitation(self) -> bool {
        self >= Version::V2025_11_25
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
