//! Where a person decides a call that needs approval, from the CLI: a
//! terminal that asks (`toolhost run` on one), a fixed answer
//! (`--approvals deny|allow`, `call --approve`), decision files another
//! process writes (`--approvals wait` and `toolhost approvals approve|deny`);
//! see docs/policy.md, "Approvals".

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Subcommand, ValueEnum};
use toolhost_runtime::approval::{
    self, Answer, ApprovalDecision, ApprovalFuture, ApprovalRequest, Approver, DecisionError,
    DecisionFile, DecisionFiles, Verdict,
};

use crate::table;
use crate::terminal;

/// `toolhost run --approvals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApprovalsArg {
    /// Deny every call that needs approval (the default off a terminal).
    Deny,
    /// Approve every call that needs approval.
    Allow,
    /// Wait for `toolhost approvals approve|deny RUN_DIR CALL_ID` (up to
    /// --approval-timeout).
    Wait,
}

/// `toolhost run`'s approval flags.
#[derive(clap::Args)]
pub struct ApprovalArgs {
    /// Who decides a call that needs a person's approval
    /// (docs/policy.md) [default: ask on the terminal, else deny].
    #[arg(long, value_enum)]
    pub approvals: Option<ApprovalsArg>,
    /// Seconds a call waits for a decision before it is denied.
    #[arg(long, value_name = "SECONDS", default_value_t = approval::DEFAULT_TIMEOUT.as_secs())]
    pub approval_timeout: u64,
}

impl ApprovalArgs {
    /// The approver of a `toolhost run`: the flag's, else a terminal that
    /// asks when stdin and stderr are one, else deny.
    pub fn approver(&self) -> Arc<dyn Approver> {
        let timeout = Duration::from_secs(self.approval_timeout);
        match self.approvals {
            Some(ApprovalsArg::Deny) => Arc::new(Answer::deny("--approvals deny")),
            Some(ApprovalsArg::Allow) => Arc::new(Answer::allow("--approvals allow")),
            Some(ApprovalsArg::Wait) => Arc::new(DecisionFiles {
                timeout,
                ..DecisionFiles::default()
            }),
            None if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() => {
                Arc::new(Terminal::new(timeout))
            }
            None => Arc::new(Answer::deny("no terminal to ask (--approvals deny)")),
        }
    }
}

/// Asks on the terminal: y (this call), a (this tool for the rest of the
/// run), n or anything else (deny), with the arguments summary. One prompt
/// at a time (a delegated child asks after the root's question is
/// answered), and one reader of stdin for the whole run, so an answer is
/// never taken by another call's prompt. An answer that comes after its
/// prompt timed out is dropped rather than given to the next call.
#[derive(Debug)]
struct Terminal {
    timeout: Duration,
    answers: tokio::sync::Mutex<Answers>,
}

#[derive(Debug)]
struct Answers {
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    /// The last prompt timed out: what is queued answered it, too late.
    stale: bool,
}

impl Terminal {
    fn new(timeout: Duration) -> Self {
        let (send, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            timeout,
            answers: tokio::sync::Mutex::new(Answers {
                lines,
                stale: false,
            }),
        }
    }
}

impl Approver for Terminal {
    fn decide<'a>(
        &'a self,
        _: &'a std::path::Path,
        request: &'a ApprovalRequest,
    ) -> ApprovalFuture<'a> {
        Box::pin(async move {
            let mut answers = self.answers.lock().await;
            if answers.stale {
                while answers.lines.try_recv().is_ok() {}
                answers.stale = false;
            }
            eprint!("{}", prompt(request));
            eprint!("approve? [y]es / [n]o / [a]lways for this run: ");
            let _ = std::io::stderr().flush();
            let by = "terminal".to_owned();
            match tokio::time::timeout(self.timeout, answers.lines.recv()).await {
                Ok(Some(line)) => match line.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => ApprovalDecision {
                        verdict: Verdict::Approved,
                        by,
                        note: None,
                    },
                    "a" | "always" => ApprovalDecision {
                        verdict: Verdict::ApprovedForRun,
                        by,
                        note: None,
                    },
                    _ => ApprovalDecision {
                        verdict: Verdict::Denied,
                        by,
                        note: Some("the person at the terminal said no".into()),
                    },
                },
                Ok(None) => ApprovalDecision {
                    verdict: Verdict::Denied,
                    by,
                    note: Some("the terminal closed".into()),
                },
                Err(_) => {
                    answers.stale = true;
                    ApprovalDecision {
                        verdict: Verdict::TimedOut,
                        by: "timeout".into(),
                        note: Some(format!("no answer within {} s", self.timeout.as_secs())),
                    }
                }
            }
        })
    }
}

/// What the terminal shows of a call waiting for approval: the run's own
/// summary of its arguments, one field a line, deciding fields (path, URL,
/// host…) first; every piece from outside escaped.
fn prompt(request: &ApprovalRequest) -> String {
    let mut text = format!(
        "\napproval needed: {} ({}), call {}\n",
        request.tool_id,
        terminal::line(request.title.as_deref().unwrap_or("")),
        terminal::line(&request.call_id),
    );
    let shown = &request.arguments_shown;
    if shown.fields.is_empty() && shown.omitted == 0 {
        text.push_str("  arguments: none\n");
    }
    for field in &shown.fields {
        text.push_str(&format!("  {}\n", terminal::line(&field.to_string())));
    }
    if shown.omitted > 0 {
        text.push_str(&format!("  … and {} more not shown\n", shown.omitted));
    }
    text.push_str(&format!("  why: {}\n", terminal::line(&request.reason)));
    text
}

/// `toolhost approvals`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The calls of a run waiting for a decision: call id, tool, arguments,
    /// why.
    List {
        run_dir: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Approve a waiting call (`--for-run`: and every later call of the
    /// same tool in this run).
    Approve {
        run_dir: std::path::PathBuf,
        call_id: String,
        #[arg(long)]
        for_run: bool,
        /// What to tell the run.
        #[arg(long)]
        note: Option<String>,
    },
    /// Deny a waiting call; the model reads the note.
    Deny {
        run_dir: std::path::PathBuf,
        call_id: String,
        #[arg(long)]
        note: Option<String>,
    },
}

pub fn run(command: ApprovalsCommand) -> Result<ExitCode> {
    match command {
        ApprovalsCommand::List { run_dir, json } => list(&run_dir, json),
        ApprovalsCommand::Approve {
            run_dir,
            call_id,
            for_run,
            note,
        } => {
            let verdict = if for_run {
                Verdict::ApprovedForRun
            } else {
                Verdict::Approved
            };
            decide(&run_dir, &call_id, verdict, note.as_deref())
        }
        ApprovalsCommand::Deny {
            run_dir,
            call_id,
            note,
        } => decide(&run_dir, &call_id, Verdict::Denied, note.as_deref()),
    }
}

fn list(run_dir: &Path, json: bool) -> Result<ExitCode> {
    let pending = approval::pending(run_dir)
        .with_context(|| format!("reading the run {}", run_dir.display()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&pending)?);
        return Ok(ExitCode::SUCCESS);
    }
    let text = |value: &serde_json::Value, key: &str| {
        terminal::line(value[key].as_str().unwrap_or_default()).into_owned()
    };
    let rows: Vec<[String; 5]> = pending
        .iter()
        .map(|waiting| {
            [
                text(&waiting.request, "callId"),
                text(&waiting.request, "toolId"),
                text(&waiting.request, "argumentsSummary"),
                text(&waiting.request, "reason"),
                if waiting.decided {
                    "decided"
                } else {
                    "waiting"
                }
                .into(),
            ]
        })
        .collect();
    table::print(["CALL", "TOOL", "ARGUMENTS", "WHY", "STATE"], &rows);
    Ok(ExitCode::SUCCESS)
}

fn decide(run_dir: &Path, call_id: &str, verdict: Verdict, note: Option<&str>) -> Result<ExitCode> {
    let by = std::env::var("USER").unwrap_or_else(|_| "toolhost approvals".into());
    let file = DecisionFile::new(call_id, verdict, &by, note);
    match approval::decide_waiting(run_dir, &file) {
        Err(error @ DecisionError::NotPending(_)) => bail!(
            "{error} ({}; `toolhost approvals list` shows those that do)",
            run_dir.display()
        ),
        other => other.with_context(|| format!("deciding in the run {}", run_dir.display()))?,
    }
    eprintln!("{}: {}", call_id, verdict.as_str());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolhost_runtime::approval::ArgumentsSummary;

    use super::*;

    #[test]
    fn the_prompt_shows_the_path_first_and_escapes_what_the_model_wrote() {
        let path = format!("output/{}/notes.md", "deep/".repeat(60));
        let arguments = json!({
            "content": format!("evil\u{202e}txt\n\u{1b}[2J{}", "x".repeat(100 * 1024)),
            "path": path,
        });
        let shown = ArgumentsSummary::of(&arguments);
        let request = ApprovalRequest {
            run_id: "r".into(),
            invocation_id: "i".into(),
            call_id: "c\u{202e}1".into(),
            round: 1,
            tool_id: toolhost_core::ToolId::builtin("workspace.write_file").expect("id"),
            title: Some("Write a workspace file".into()),
            arguments_summary: shown.to_string(),
            arguments_shown: shown,
            annotations: json!({}),
            source: "builtin".into(),
            reason: "the user's policy asks".into(),
        };
        let text = prompt(&request);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], format!("  path: \"{path}\""), "{text}");
        assert!(
            lines[3].starts_with("  content: \"evil\\u{202e}txt\\n\\u001b[2J"),
            "{text}"
        );
        assert!(lines[3].ends_with("…\" (100.0 KiB, 2 lines)"), "{text}");
        assert!(lines[1].contains("call c\\u{202e}1"), "{text}");
        assert!(
            !text.contains('\u{202e}') && !text.contains('\u{1b}'),
            "{text}"
        );
        assert_eq!(lines.len(), 5, "{text}");
    }
}
