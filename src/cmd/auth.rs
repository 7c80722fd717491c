//! `nod mcp auth <name> [--open]` and `nod mcp logout <name>`.

use anyhow::bail;

use super::{Exit, One, print};
use crate::config::Transport;
use crate::oauth::{self, store};
use crate::session::catalog::{self, Kind};

pub fn auth(name: &str, open: bool) -> anyhow::Result<Exit> {
    let loaded = super::load_profile(Some(name))?;
    let config = super::find_server(&loaded, name)?;
    if matches!(config.transport, Transport::Stdio(_)) {
        bail!(
            "server {name} is a local server; authorization is for remote servers (give a stdio server its credentials in environment)"
        );
    }
    oauth::allow_browser_flow();
    if open {
        oauth::open_browser();
    }
    // Connecting and listing reaches whatever the server protects; a 401 on the way runs the
    // authorization flow.
    let one = One::plain(name)?;
    catalog::list(one.session(), Kind::Tools)?;
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
