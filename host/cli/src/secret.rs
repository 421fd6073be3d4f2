//! `toolhost secret …`: the values an extension's requests carry without
//! the extension ever reading them. Stored beside the extensions (0600,
//! outside any run directory), per owner: the local use, or a `toolhost
//! serve` tenant. `ext grant --secret KEY=NAME` binds one to a host and a
//! header.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use toolhost_extensions::secrets::MAX_SECRET_BYTES;
use toolhost_extensions::{SecretStore, SecretValue};

#[derive(Subcommand)]
pub enum SecretCommand {
    /// Store a secret's value, read from standard input (without echo on a
    /// terminal) or from a file; it replaces the value stored under NAME.
    Set {
        /// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}`.
        name: String,
        /// Read the value from this file instead of standard input.
        #[arg(long, value_name = "FILE")]
        from_file: Option<PathBuf>,
        /// The `toolhost serve` tenant whose secret this is [default: the
        /// local use: `toolhost run`, `call`, `mcp serve`].
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
    },
    /// The names of the stored secrets (never their values).
    List {
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
    },
    /// Forget a stored secret.
    Remove {
        name: String,
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
    },
}

pub fn run(ext_dir: &Path, command: SecretCommand) -> Result<ExitCode> {
    let store = SecretStore::of_registry(ext_dir);
    match command {
        SecretCommand::Set {
            name,
            from_file,
            tenant,
        } => {
            let bytes = match &from_file {
                Some(path) => read_bounded(
                    std::fs::File::open(path)
                        .with_context(|| format!("reading {}", path.display()))?,
                )?,
                None => read_stdin(&name)?,
            };
            let value = SecretValue::new(&bytes)?;
            store.set(tenant.as_deref(), &name, &value)?;
            println!(
                "stored secret {name} for {} ({} bytes); bind it with `toolhost ext grant ID --secret KEY={name} --for HOST --header NAME --format \"Bearer {{}}\"`",
                owner(tenant.as_deref()),
                value.expose().len()
            );
        }
        SecretCommand::List { tenant } => {
            let names = store.list(tenant.as_deref())?;
            if names.is_empty() {
                println!("no secrets stored for {}", owner(tenant.as_deref()));
            }
            for name in names {
                println!("{name}");
            }
        }
        SecretCommand::Remove { name, tenant } => {
            if !store.remove(tenant.as_deref(), &name)? {
                bail!(
                    "secret.not_set: no secret `{name}` is stored for {}",
                    owner(tenant.as_deref())
                );
            }
            println!("removed secret {name} for {}", owner(tenant.as_deref()));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn owner(tenant: Option<&str>) -> String {
    match tenant {
        None => "the local use".to_owned(),
        Some(tenant) => format!("tenant {tenant}"),
    }
}

/// At most one byte more than a value may hold (and its newline), so an
/// endless stream is cut off and refused, never read whole.
fn read_bounded(reader: impl Read) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_SECRET_BYTES as u64 + 3)
        .read_to_end(&mut bytes)
        .context("reading the secret's value")?;
    Ok(bytes)
}

/// Standard input; on a terminal, one line typed without echo.
fn read_stdin(name: &str) -> Result<Vec<u8>> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return read_bounded(stdin.lock());
    }
    eprint!("value of secret {name} (not shown): ");
    std::io::stderr().flush().ok();
    let saved = rustix::termios::tcgetattr(&stdin).context("reading the terminal's mode")?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
    rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet)
        .context("turning the terminal's echo off")?;
    let mut line = String::new();
    let read = stdin
        .lock()
        .take(MAX_SECRET_BYTES as u64 + 3)
        .read_line(&mut line);
    // Echo comes back whatever the read did.
    let restored =
        rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &saved);
    eprintln!();
    read.context("reading the secret's value")?;
    restored.context("turning the terminal's echo back on")?;
    Ok(line.into_bytes())
}
