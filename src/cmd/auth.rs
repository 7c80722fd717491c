//! `nod mcp auth <name> [--open]` and `nod mcp logout <name>`.

use std::sync::Arc;

use anyhow::bail;

use super::{Context, Exit, One, print};
use crate::config::Transport;
use crate::oauth::{self, store};
use crate::session::Access;
use crate::session::catalog::{self, Kind};

pub fn auth(name: &str, open: bool, ctx: &Context) -> anyhow::Result<Exit> {
    let loaded = super::load_profile(Some(name), ctx)?;
    let config = super::find_server(&loaded, name)?;
    if matches!(config.transport, Transport::Stdio(_)) {
        bail!(
            "server {name} is a local server; authorization is for remote servers (give a stdio server its credentials in environment)"
        );
    }
    // Connecting and listing reaches whatever the server protects; a 401 on the way runs the
    // authorization flow, afresh (stored tokens are ignored).
    let access = Access { browser: Some(Arc::new(super::browser::Interactive { open })), fresh: true };
    let one = One::connect_with(name, super::no_input(), &access, ctx)?;
    if one.session().has("tools") {
        catalog::list(one.session(), Kind::Tools)?;
    }
    drop(one);
    match store::state(&store::path()?, name) {
        store::Stored::Valid => print(&format!(
            "authorized server {name}; the token is stored privately in {}\n",
            store::path()?.display()
        ))?,
        _ => print(&format!("server {name} did not ask for authorization\n"))?,
    }
    Ok(Exit::Ok)
}

pub fn logout(name: &str) -> anyhow::Result<Exit> {
    let message = oauth::logout(name)?;
    print(&format!("{message}\n"))?;
    Ok(Exit::Ok)
}
