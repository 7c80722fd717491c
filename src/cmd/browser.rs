//! The browser side of OAuth for `nod mcp`: showing the authorization URL, opening it
//! (`BROWSER`, then `xdg-open`, never through a shell), and a redirect URL pasted on stdin.
//! The engine never does any of this itself: it asks through `oauth::Browser`. A URL that
//! breaks the OAuth URL rule (`net::url::check_oauth_url`) is neither printed nor opened.

use std::io::BufRead;
use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::oauth::{AuthError, Browser};

/// `nod mcp auth`: prints the URL, opens it with `--open` (or when `BROWSER` is set), and
/// takes a pasted redirect URL from stdin.
pub struct Interactive {
    pub open: bool,
}

impl Browser for Interactive {
    fn show(&self, server: &str, url: &str) -> Result<(), AuthError> {
        showable(url)?;
        eprintln!(
            "nod: to authorize server {server}, open this URL in a browser:\n{}",
            crate::util::terminal_safe(url)
        );
        eprintln!("nod: waiting for the browser; on a machine without one, paste the final redirect URL here");
        if self.open || browser_configured() {
            open(url).map_err(AuthError::Flow)?;
        }
        Ok(())
    }

    fn pasted(&self) -> Option<Receiver<String>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        // The reader ends with stdin or with the process: a blocked read cannot be cancelled.
        let _ = std::thread::Builder::new().name("nod-oauth-paste".into()).spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Some(rx)
    }
}

/// Other `nod mcp` commands: a flow may run only when `BROWSER` names a program that can
/// complete it (headless automation, the conformance adapter). Never reads stdin.
pub struct Configured;

impl Browser for Configured {
    fn show(&self, server: &str, url: &str) -> Result<(), AuthError> {
        showable(url)?;
        eprintln!("nod: authorizing server {server} in the browser named by BROWSER");
        open(url).map_err(AuthError::Flow)
    }
}

/// The browser for commands that do not ask to authorize: `Configured` when `BROWSER` is
/// set, else none (a 401 says "run nod mcp auth").
pub fn from_environment() -> Option<Arc<dyn Browser>> {
    browser_configured().then(|| Arc::new(Configured) as Arc<dyn Browser>)
}

fn browser_configured() -> bool {
    std::env::var_os("BROWSER").is_some_and(|b| !b.is_empty())
}

/// An authorization URL is printed and opened only when it keeps the OAuth URL rule (https,
/// or http to a loopback host; nothing unprintable), whatever the engine checked before.
fn showable(url: &str) -> Result<(), AuthError> {
    crate::net::url::check_oauth_url(url)
        .map_err(|why| AuthError::Flow(anyhow::Error::new(why).context("refusing to show the authorization URL")))
}

/// Opens the URL in a browser without a shell: `BROWSER` (a program and its arguments,
/// split on spaces, with the URL last), else `xdg-open`.
pub fn open(url: &str) -> anyhow::Result<()> {
    if let Err(why) = crate::net::url::check_oauth_url(url) {
        return Err(anyhow::Error::new(why).context("refusing to open the URL"));
    }
    let browser = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty());
    let mut words: Vec<String> = match &browser {
        Some(browser) => browser.split_whitespace().map(str::to_string).collect(),
        None => vec!["xdg-open".into()],
    };
    let program = words.remove(0);
    crate::transport::child::launch_detached(&program, &words, url)
        .map_err(|e| anyhow::anyhow!("could not start the browser ({program}): {e}"))
}
