//! The agent: a conversation with a model that reaches MCP tools through capability search,
//! explicit selection and aliases, under nod's permission policy. Front ends (`nod ask`, the
//! shell, ACP) drive it through the `Surface` trait; it has one loop.

pub mod limits;
pub mod names;
pub mod text;
