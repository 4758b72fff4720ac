//! `oscost completions SHELL` and `oscost man`: the command line described for the shell and
//! for man(1), generated from the same clap definition that parses it (so they cannot drift).

use clap::Args;

use super::print_stdout;
use super::{Command, Given};
use crate::effects::gate::Effects;

#[derive(Debug, Args, Clone)]
/// `oscost completions`'s arguments.
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Bash: `source <(oscost completions
    /// bash)`; zsh: write it to a directory on $fpath as `_oscost`; fish: to
    /// ~/.config/fish/completions/oscost.fish.
    pub shell: clap_complete::Shell,
}

impl Command for CompletionsArgs {
    /// It writes only to standard output; the default store is still kept safe.
    fn effects(&self) -> Effects {
        Effects::new().store(None)
    }

    /// `cli`: the whole command line's definition (`cli.rs` hands it down).
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut cli = without_hidden((given.cli)());
        let mut out = Vec::new();
        clap_complete::generate(self.shell, &mut cli, "oscost", &mut out);
        print_stdout(&String::from_utf8_lossy(&out))?;
        Ok(0)
    }
}

/// The command line as a user completes it: the same arguments and subcommands, less the
/// hidden ones (`__worker`, which oscost starts itself), which every shell's generator would
/// otherwise offer.
fn without_hidden(cli: clap::Command) -> clap::Command {
    let mut shown = clap::Command::new("oscost").version(env!("CARGO_PKG_VERSION"));
    if let Some(a) = cli.get_about() {
        shown = shown.about(a.clone());
    }
    shown
        .args(cli.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(cli.get_subcommands().filter(|c| !c.is_hide_set()).cloned())
}

#[derive(Debug, Args, Clone)]
/// `oscost man`'s arguments (none).
pub struct ManArgs {}

impl Command for ManArgs {
    /// It writes only to standard output; the default store is still kept safe.
    fn effects(&self) -> Effects {
        Effects::new().store(None)
    }

    /// The page in roff: `oscost man | man -l -`, or save it as oscost.1 on $MANPATH.
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let cli = (given.cli)();
        print_stdout(&man_page(cli)?)?;
        Ok(0)
    }
}

/// What the clap definition cannot say: how `--where` reads, the exit statuses, the
/// environment. Kept in step with the README's sections of the same names.
const MORE: &str = r#".SH SELECTING RUNS
\fB\-\-where\fR \fICOND\fR selects stored runs for \fBhistory\fR, \fBcompare\fR, \fBreport\fR, \fBshow\fR, \fBexport\fR, \fBmatrix\fR and \fBpush\fR; it may be repeated, and all conditions must hold.
A condition is \fIKEY\fR=\fIVALUE\fR, \fIKEY\fR!=\fIVALUE\fR or \fIKEY\fR~\fITEXT\fR (contains), for the keys \fBlabel\fR, \fBhost\fR, \fBkernel\fR, \fBwrapper\fR, \fBdate\fR and \fBid\fR; \fBdate\fR and \fBid\fR also take >=, <=, > and <.
A date is a prefix of 2026\-11\-24T00:40:55Z and is compared on the characters given: \fBdate=2026\-11\fR is that month.
\fBlast\fR and \fBlast~N\fR count within the selection.
.SH EXIT STATUS
.TP
0
every benchmark measured (or skipped with a reason).
.TP
1
a benchmark failed, an output could not be written after measuring, a run could not be saved (it is then kept as a run file, and the message says where), or \fB\-\-fail\-above\fR was breached.
.TP
2
a usage error, found before measuring: a bad argument, an output that cannot be written or that is the store itself, a store that is read\-only, locked, someone else's or unreachable.
.TP
128+N
stopped by signal N; nothing is left behind.
.SH ENVIRONMENT
.TP
OSCOST_DB
the store when \fB\-\-db\fR is not given: a file, or a postgresql:// URL.
.TP
XDG_DATA_HOME
where the default store (oscost/results.db) and runs that could not be saved (oscost/unsaved/) are kept.
.TP
PGPASSWORD, PGPASSFILE, PGSSLMODE, PGSSLROOTCERT
as libpq reads them, for a PostgreSQL store.
.TP
NO_COLOR
no colour in tables.
"#;

/// One page for the whole command line: the top level, then every command with its synopsis
/// and options (clap_mangen alone writes a page that points at oscost-run(1) and others that
/// do not exist), then `MORE`.
fn man_page(cmd: clap::Command) -> anyhow::Result<String> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    let mut text = String::from_utf8(out)?;
    text.push_str(&format!(".SH SYNOPSIS\n{}\n", synopsis(&cmd, "oscost")));
    let mut out = text.into_bytes();
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let mut text = String::from_utf8(out)?;
    text.push_str(".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("oscost {}", sub.get_name());
        let sub = sub.clone().bin_name(name.clone());
        let man = clap_mangen::Man::new(sub.clone());
        text.push_str(&format!(".SS {name}\n"));
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            text.push_str(&format!("{}\n", roff_text(&about.to_string())));
        }
        text.push_str(&format!(".PP\n{}\n", synopsis(&sub, &name)));
        let mut options = Vec::new();
        man.render_options_section(&mut options)?;
        let options = String::from_utf8(options)?;
        text.push_str(&options.replace(".SH OPTIONS\n", ""));
    }
    text.push_str(&examples(README));
    text.push_str(MORE);
    Ok(text)
}

/// A synopsis line as man pages write one: the command in bold, `[OPTIONS]` where it has any
/// (each listed with its value under it, which clap_mangen's synopsis leaves out: it printed
/// `[--precision]` for `--precision <PCT>`), its positional arguments by their value names,
/// and `[COMMAND]` where it has commands.
fn synopsis(cmd: &clap::Command, name: &str) -> String {
    let mut words = vec![format!("\\fB{}\\fR", roff_text(name))];
    let args: Vec<&clap::Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
    if args.iter().any(|a| !a.is_positional()) {
        words.push("[\\fIOPTIONS\\fR]".into());
    }
    for a in args.iter().filter(|a| a.is_positional()) {
        let value = a
            .get_value_names()
            .and_then(|v| v.first())
            .map_or_else(|| a.get_id().to_string().to_uppercase(), |v| v.to_string());
        let many = a.get_num_args().is_some_and(|n| n.max_values() > 1);
        let word = format!(
            "\\fI{}\\fR{}",
            roff_text(&value),
            if many { "..." } else { "" }
        );
        words.push(if a.is_required_set() {
            word
        } else {
            format!("[{word}]")
        });
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        words.push("[\\fICOMMAND\\fR]".into());
    }
    words.join(" ")
}

/// The README, whose Usage block is the man page's EXAMPLES: one list, kept in step by being
/// one.
const README: &str = include_str!("../../../README.md");

/// `.SH EXAMPLES` from the first code block under `## Usage` in `readme`: each command in
/// bold, its `# comment` as the paragraph under it.
fn examples(readme: &str) -> String {
    let mut out = String::from(".SH EXAMPLES\n");
    let block = readme
        .split_once("## Usage")
        .and_then(|(_, rest)| rest.split_once("```"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map_or("", |(b, _)| b);
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (cmd, what) = line
            .split_once("  #")
            .map_or((line, ""), |(c, w)| (c.trim(), w.trim()));
        out.push_str(&format!(
            ".TP\n\\fB{}\\fR\n{}\n",
            roff_text(cmd),
            roff_text(what)
        ));
    }
    out
}

/// Text for a roff paragraph: a leading dot or quote would be read as a request.
fn roff_text(s: &str) -> String {
    s.lines()
        .map(|l| {
            let l = l.replace('\\', "\\e").replace('-', "\\-");
            if l.starts_with(['.', '\'']) {
                format!("\\&{l}")
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_examples_are_the_readmes_usage_block() {
        let ex = super::examples(super::README);
        assert!(ex.starts_with(".SH EXAMPLES\n"));
        assert!(ex.matches(".TP").count() >= 10, "{ex}");
        assert!(ex.contains("\\fBoscost list\\fR"), "{ex}");
        assert!(!ex.contains("```"));
    }

    #[test]
    fn the_man_page_names_no_page_that_does_not_exist_and_documents_where() {
        use clap::CommandFactory;
        let page = super::man_page(crate::cli::Cli::command()).unwrap();
        assert!(
            !page.contains("oscost\\-run(1)") && !page.contains("(1)\n"),
            "{page}"
        );
        assert!(page.contains(".SS oscost matrix"));
        assert_eq!(
            page.matches(".SH OPTIONS").count(),
            1,
            "one OPTIONS section"
        );
        assert!(page.contains("SELECTING RUNS") && page.contains("\\-\\-where"));
        assert!(page.contains("EXIT STATUS"));
    }
}
