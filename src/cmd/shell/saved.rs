//! The shell's saved sessions and roots: a conversation saved from its first prompt,
//! `/resume`, and `/add-dir`.

use super::Shell;
use crate::cmd::form::Reply;
use crate::config;
use crate::util::terminal_safe;

impl Shell<'_> {
    /// A conversation that is not saved yet and should be starts its file, titled by `line`.
    pub(super) fn start_saving(&mut self, line: &str) {
        let Some(home) = &self.saving else { return };
        if self.agent.saved_id().is_some() {
            return;
        }
        let meta = crate::saved::Meta::new("shell", &workspace(), self.agent.model(), line, &self.ctx.redactor);
        match crate::saved::Recorder::create(home, meta, self.ctx.redactor.clone()) {
            Ok(recorder) => self.agent.save_to(recorder),
            Err(err) => eprintln!("! {}; this conversation is not saved", terminal_safe(&format!("{err:#}"))),
        }
    }

    /// `/add-dir PATH`: offers PATH to the servers as a root from now on, and tells the
    /// connected ones that their roots changed.
    pub(super) fn add_dir(&mut self, rest: &str) {
        let path = rest.trim();
        if path.is_empty() {
            let dirs: Vec<String> = self.roots.dirs().iter().map(|d| d.display().to_string()).collect();
            println!("roots: {}", terminal_safe(&dirs.join(", ")));
            return;
        }
        match self.roots.add(std::path::Path::new(path)) {
            Ok(true) => {
                let runtime = self.agent.runtime().clone();
                let mut told = 0;
                for name in runtime.ready() {
                    // Initialize-era servers hear of the change; a 2026-07-28 one asks each time.
                    if let Ok(session) = runtime.session(&name)
                        && !session.is_modern()
                    {
                        session.notify(crate::mcp::method::ROOTS_CHANGED, None);
                        told += 1;
                    }
                }
                println!("added root {} (told {told} server{})", terminal_safe(path), if told == 1 { "" } else { "s" });
            }
            Ok(false) => println!("{} is a root already", terminal_safe(path)),
            Err(why) => {
                self.failed = true;
                eprintln!("✗ {}", terminal_safe(&why));
            }
        }
    }

    /// `/resume [id]`: goes on with a saved session (a unique prefix of its id); without one,
    /// this workspace's recent sessions as a numbered menu.
    pub(super) fn resume(&mut self, rest: &str) {
        let Ok(home) = config::home() else { return };
        let mut choice = rest.trim().to_string();
        if choice.is_empty() {
            let here = workspace();
            let recent: Vec<crate::saved::Summary> =
                crate::saved::list(&home).into_iter().filter(|s| s.meta.workspace == here).take(10).collect();
            if recent.is_empty() {
                println!("no saved session of this workspace");
                return;
            }
            for (i, s) in recent.iter().enumerate() {
                println!("  {}. {}  {} msg  {}", i + 1, s.meta.id, s.messages, terminal_safe(&s.meta.title));
            }
            if !self.input.can_ask() {
                println!("resume one with /resume <id>");
                return;
            }
            let trigger = self.arm();
            let picked = match self.input.prompt("session number (Enter: none): ", &trigger) {
                Reply::Line(line) => line,
                _ => return,
            };
            match picked.trim().parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| recent.get(i)) {
                Some(s) => choice = s.meta.id.clone(),
                None => return,
            }
        }
        let loaded =
            crate::saved::resolve(&home, &choice).and_then(|id| Ok((id.clone(), crate::saved::load(&home, &id)?)));
        let (id, loaded) = match loaded {
            Ok(found) => found,
            Err(err) => {
                self.failed = true;
                eprintln!("✗ {}", terminal_safe(&format!("{err:#}")));
                return;
            }
        };
        for warning in &loaded.warnings {
            eprintln!("! {}", terminal_safe(warning));
        }
        let (count, title) = (loaded.messages.len(), loaded.meta.title.clone());
        self.agent.reset();
        self.attachments.clear();
        let recorder = self.saving.as_ref().and_then(|_| {
            crate::saved::Recorder::resume(&home, &id, self.ctx.redactor.clone())
                .inspect_err(|err| eprintln!("! {}; the rest of it is not saved", terminal_safe(&format!("{err:#}"))))
                .ok()
        });
        self.agent.go_on(loaded, recorder);
        println!("session {id} · {count} messages · {}", terminal_safe(&title));
    }
}

/// The workspace sessions belong to: the project root of the current directory.
pub(super) fn workspace() -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    config::project::locate(&cwd).0.display().to_string()
}
