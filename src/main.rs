//! The `toolpulse` command: parses the command line and hands over to the library. Errors are
//! printed as one line and exit non-zero; nothing here panics on bad input.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand};
use toolpulse::{Config, Rewriter};

/// Read size for `rewrite`: one upstream-sized chunk at a time, so output streams as it comes.
const READ_CHUNK_BYTES: usize = 64 * 1024;

#[derive(Parser)]
#[command(
    name = "toolpulse",
    version,
    about = "Tool lifecycle events for OpenAI Responses API streams"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Rewrite a recorded SSE stream (a file, or `-` for stdin) to stdout, as the proxy would.
    Rewrite {
        /// Config file (TOML); built-in defaults when absent.
        #[arg(long, env = "TOOLPULSE_CONFIG")]
        config: Option<PathBuf>,
        /// The upstream stream to rewrite.
        #[arg(default_value = "-")]
        input: PathBuf,
    },
    /// Validate a config file and print the classification rules it resolves to.
    Check {
        /// Config file (TOML).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Rewrite { config, input } => rewrite(config.as_deref(), &input),
        Command::Check { file } => check(&file),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolpulse: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    Ok(match path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    })
}

fn rewrite(config: Option<&Path>, input: &Path) -> anyhow::Result<()> {
    let config = Arc::new(load_config(config)?);
    let mut reader: Box<dyn Read> = if input == Path::new("-") {
        Box::new(io::stdin().lock())
    } else {
        let file = std::fs::File::open(input)
            .with_context(|| format!("cannot read {}", input.display()))?;
        Box::new(file)
    };
    let mut rewriter = Rewriter::new(config);
    let mut stdout = io::stdout().lock();
    let mut buf = vec![0; READ_CHUNK_BYTES];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", input.display())),
        };
        stdout.write_all(&rewriter.feed(&buf[..n], Instant::now()))?;
        stdout.flush()?;
    }
    stdout.write_all(&rewriter.finish(Instant::now()))?;
    stdout.flush()?;
    Ok(())
}

fn check(file: &Path) -> anyhow::Result<()> {
    let config = Config::load(file)?;
    print!("{}: valid\n\n{}", file.display(), config.describe());
    Ok(())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}
