//! `nod mcp auth <name> [--open]` and `nod mcp logout <name>`.

use std::sync::Arc;

use serde_json::json;

use super::failure::{Kind, fail};
use super::{Context, Exit, One, print, print_json};
use crate::config::Transport;
use crate::oauth::{self, store};
use crate::session::Access;
use crate::session::catalog::{self, Kind as Catalog};

pub fn auth(name: &str, open: bool, ctx: &Context) -> anyhow::Result<Exit> {
    auth_with(name, Arc::new(super::browser::Interactive { open }), ctx)
}

/// `auth` with the browser side given: the shell shows the URL and reads a pasted redirect
/// without echo, and stops reading when the flow ends.
pub fn auth_with(name: &str, browser: Arc<dyn crate::oauth::Browser>, ctx: &Context) -> anyhow::Result<Exit> {
    let loaded = super::one::load_profile(Some(name), ctx)?;
    let config = super::one::find_server(&loaded, name)?;
    if matches!(config.transport, Transport::Stdio(_)) {
        return Err(fail(
            Kind::Usage,
            format!(
                "server {name} is a local server; authorization is for remote servers (give a stdio server its credentials in its environment)"
            ),
        ));
    }
    // Connecting and listing reaches whatever the server protects; a 401 on the way runs the
    // authorization flow, afresh (stored tokens are ignored).
    let access = Access {
        browser: Some(browser),
        fresh: true,
        redactor: ctx.redactor.clone(),
        revisions: crate::session::revisions::default_path(),
        private_env: crate::config::private_env(&loaded),
    };
    let one = One::connect_with(name, super::one::no_input(), &access, ctx)?;
    if one.session().has("tools") {
        catalog::list(one.session(), Catalog::Tools)?;
    }
    drop(one);
    let path = store::path()?;
    let authorized = store::state(&path, name) == store::Stored::Valid;
    if ctx.options.json {
        print_json(&json!({ "server": name, "authorized": authorized, "credentials": path }))?;
    } else if authorized {
        print(&format!("authorized server {name}; the token is stored privately in {}\n", path.display()))?;
    } else {
        print(&format!("server {name} did not ask for authorization\n"))?;
    }
    Ok(Exit::Ok)
}

pub fn logout(name: &str, json: bool) -> anyhow::Result<Exit> {
    if store::state(&store::path()?, name) == store::Stored::None {
        return Err(fail(Kind::NotFound, format!("no stored credentials for server {name}")));
    }
    let message = oauth::logout(name)?;
    if json {
        print_json(&json!({ "server": name, "message": message }))?;
    } else {
        print(&format!("{message}\n"))?;
    }
    Ok(Exit::Ok)
}
