//! The `toolpulse` command: parses the command line and hands over to the library. Errors are
//! printed once and exit non-zero; nothing here panics on bad input, nor when stdout's reader
//! goes away (`toolpulse check FILE | head -1`): that ends quietly with status 0.

use std::io::{self, IsTerminal, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use toolpulse::{Config, Rewriter};

/// Read size for `rewrite`: one upstream-sized chunk at a time, so output streams as it comes.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// `toolpulse health` gives up after this long.
const HEALTH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

#[derive(Parser)]
#[command(
    name = "toolpulse",
    version,
    about = "Tool lifecycle events for OpenAI Responses API streams",
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

/// Running the proxy (the default command). The addresses and the upstream may also come before
/// `check`, which then shows the config as the proxy would run it: the image's ENTRYPOINT gives
/// its 0.0.0.0 addresses this way, so `docker run IMAGE check FILE` shows those.
#[derive(clap::Args)]
struct ServeArgs {
    /// Config file (TOML); built-in defaults when absent.
    #[arg(long, env = "TOOLPULSE_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on (overrides `[proxy] listen`).
    #[arg(long, env = "TOOLPULSE_LISTEN", value_parser = toolpulse::config::parse_listen)]
    listen: Option<SocketAddr>,
    /// The gateway's base URL (overrides `[proxy] upstream`).
    #[arg(long, env = "TOOLPULSE_UPSTREAM")]
    upstream: Option<String>,
    /// Address of the admin endpoints /healthz, /readyz, /metrics (overrides `[admin] listen`).
    #[arg(long, env = "TOOLPULSE_ADMIN_LISTEN", value_parser = toolpulse::config::parse_listen)]
    admin_listen: Option<SocketAddr>,
    /// Log line format on stderr; filter with RUST_LOG (default `info`).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scripted gateway, the proxy in front of it and one request, printing events live.
    Demo {
        /// Serve a demo page instead, showing tool progress live in the browser (until Ctrl-C).
        #[arg(long)]
        web: bool,
        /// The demo page's loopback address (default: 127.0.0.1 on a free port).
        #[arg(long, requires = "web", value_parser = toolpulse::config::parse_listen)]
        listen: Option<SocketAddr>,
        /// The event profiles to show, e.g. `openai,progress` or `stages`
        /// (default: `hosted,progress`, what a default toolpulse shows, with the tools' progress).
        #[arg(long, conflicts_with = "web")]
        profiles: Option<String>,
    },
    /// Rewrite a recorded SSE stream (a file, or `-` for stdin) to stdout, as the proxy would.
    Rewrite {
        /// Config file (TOML); built-in defaults when absent.
        #[arg(long, env = "TOOLPULSE_CONFIG")]
        config: Option<PathBuf>,
        /// Event profiles to render, e.g. `tool,stages` (default: the config's `[events]`).
        #[arg(long)]
        profiles: Option<String>,
        /// The upstream stream to rewrite.
        #[arg(default_value = "-")]
        input: PathBuf,
        /// Feed the rewriter one event per call, as the proxy does when a paced upstream sends
        /// one event per read (bench/instructions.sh's `-paced` scenarios); the same output.
        #[arg(long, hide = true)]
        event_per_read: bool,
    },
    /// Exit 0 if the toolpulse whose admin listener is at ADDR is healthy (for HEALTHCHECK).
    Health {
        /// The admin listener's address.
        #[arg(long, default_value = toolpulse::config::DEFAULT_ADMIN_LISTEN,
              value_parser = toolpulse::config::parse_listen)]
        admin: SocketAddr,
    },
    /// Print the config file's keys: `--defaults`, every key with its built-in default, as
    /// commented TOML (a starting point for a config file).
    Config {
        /// Every key with its built-in default (the only form for now).
        #[arg(long, required = true)]
        defaults: bool,
    },
    /// Validate a config file and print the classification rules it resolves to.
    Check {
        /// Config file (TOML).
        file: PathBuf,
        /// A recorded upstream stream: list the tools in it that ran as generic functions,
        /// without events, because no `[[tools]]` rule names them.
        #[arg(long, value_name = "FILE")]
        upstream_sample: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // A config error names the file; one the user never typed also says where it came from.
    let from_env = |matches: &clap::ArgMatches| {
        matches.value_source("config") == Some(ValueSource::EnvVariable)
    };
    let serve_config_from_env = from_env(&matches);
    let rewrite_config_from_env = matches.subcommand_matches("rewrite").is_some_and(from_env);
    let result = match cli.command {
        None => serve(cli.serve, serve_config_from_env),
        Some(Command::Demo {
            web: false,
            profiles,
            ..
        }) => runtime().and_then(|rt| rt.block_on(toolpulse::app::demo::run(profiles.as_deref()))),
        Some(Command::Demo {
            web: true, listen, ..
        }) => {
            let listen = listen.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
            runtime().and_then(|rt| rt.block_on(toolpulse::app::demo::web::run(listen)))
        }
        Some(Command::Rewrite {
            config,
            profiles,
            input,
            event_per_read,
        }) => {
            let config = config.as_deref().map(|p| (p, rewrite_config_from_env));
            rewrite(config, profiles.as_deref(), &input, event_per_read)
        }
        Some(Command::Check {
            file,
            upstream_sample,
        }) => overrides(&cli.serve)
            .and_then(|overrides| check(&file, &overrides, upstream_sample.as_deref())),
        Some(Command::Config { defaults: _ }) => {
            let text = toolpulse::config::defaults::defaults_toml();
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(anyhow::Error::from)
        }
        Some(Command::Health { admin }) => toolpulse::app::admin::probe(admin, HEALTH_TIMEOUT),
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

/// The runtime: one worker thread per CPU the process may use (its affinity and cgroup quota, as
/// `available_parallelism` reports them), or `TOKIO_WORKER_THREADS`. With one, a current-thread
/// runtime: a 1-CPU container or a pinned process gains nothing from work stealing and pays
/// for its cross-thread wake-ups on every event.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    let threads = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(threads);
        builder
    };
    Ok(builder.enable_all().build()?)
}

/// The flags (or their variables) that win over the config file's values.
fn overrides(args: &ServeArgs) -> anyhow::Result<toolpulse::config::Overrides> {
    let upstream = match &args.upstream {
        Some(text) => Some(
            toolpulse::config::parse_upstream(text)
                .map_err(|e| anyhow::anyhow!("--upstream {text}: {e}"))?,
        ),
        None => None,
    };
    Ok(toolpulse::config::Overrides {
        listen: args.listen,
        admin_listen: args.admin_listen,
        upstream,
    })
}

fn serve(args: ServeArgs, config_from_env: bool) -> anyhow::Result<()> {
    let path = args.config.as_deref().map(|p| (p, config_from_env));
    let mut config = load_config(path)?;
    let overrides = overrides(&args)?;
    overrides.apply(&mut config);
    init_logs(args.log_format);
    runtime()?.block_on(toolpulse::app::serve::run(config, args.config, overrides))
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
}

/// The config file (and whether `TOOLPULSE_CONFIG` named it), else the defaults.
fn load_config(path: Option<(&Path, bool)>) -> anyhow::Result<Config> {
    Ok(match path {
        Some((path, false)) => Config::load(path)?,
        Some((path, true)) => Config::load(path).context("the config TOOLPULSE_CONFIG names")?,
        None => Config::from_environment()?,
    })
}

fn rewrite(
    config: Option<(&Path, bool)>,
    profiles: Option<&str>,
    input: &Path,
    event_per_read: bool,
) -> anyhow::Result<()> {
    let config = Arc::new(load_config(config)?);
    let mut rewriter =
        Rewriter::new(config.settings()).with_wall_clock(SystemTime::now(), Instant::now());
    if let Some(list) = profiles {
        let picked =
            toolpulse::core::profiles::parse_list(list, &toolpulse::core::profiles::Profile::ALL)
                .map_err(|e| anyhow::anyhow!("--profiles: {e}"))?;
        rewriter = rewriter.with_profiles(picked);
    }
    let mut reader: Box<dyn Read> = if input == Path::new("-") {
        Box::new(io::stdin().lock())
    } else {
        let file = std::fs::File::open(input)
            .with_context(|| format!("cannot read {}", input.display()))?;
        Box::new(file)
    };
    let mut stdout = io::stdout().lock();
    if event_per_read {
        let mut all = Vec::new();
        reader
            .read_to_end(&mut all)
            .with_context(|| format!("reading {}", input.display()))?;
        let mut out = io::BufWriter::new(stdout);
        feed_events(&mut rewriter, &all, &mut out)?;
        out.write_all(&rewriter.finish(Instant::now()))?;
        out.flush()?;
        return Ok(());
    }
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

/// `rewrite --event-per-read`: each event (up to and with the `\n\n` that ends it) fed alone,
/// as the proxy feeds a paced upstream's reads: handed on as the upstream connection hands a
/// small read on (its data copied out with `http1::buffer::copy_out`, as
/// `net/upstream/h1/read.rs` does), its output taken
/// from a queue kept across calls (`feed_into`). Output is buffered, so a write per event does
/// not weigh in the count.
fn feed_events(rewriter: &mut Rewriter, input: &[u8], out: &mut impl Write) -> io::Result<()> {
    let mut queued = std::collections::VecDeque::new();
    // Built once: the split is not what is measured.
    let blank_line = memchr::memmem::Finder::new(b"\n\n");
    let mut copies = bytes::BytesMut::new();
    let mut rest = input;
    while !rest.is_empty() {
        let end = blank_line.find(rest).map_or(rest.len(), |i| i + 2);
        let (event, tail) = rest.split_at(end);
        let chunk = toolpulse::http1::buffer::copy_out(event, &mut copies);
        rewriter.feed_into(chunk, Instant::now(), &mut queued);
        for piece in queued.drain(..) {
            out.write_all(&piece)?;
        }
        rest = tail;
    }
    Ok(())
}

/// Writes with `write!` to a locked stdout, never `print!`: a reader that went away
/// (`check … | head -1`) is an error here that `main` ends quietly on, not a panic.
fn check(
    file: &Path,
    overrides: &toolpulse::config::Overrides,
    upstream_sample: Option<&Path>,
) -> anyhow::Result<()> {
    let mut config = Config::load(file)?;
    overrides.apply(&mut config);
    let mut stdout = io::stdout().lock();
    write!(stdout, "{}: valid\n\n{}", file.display(), config.describe())?;
    if let Some(warning) = config
        .proxy
        .upstream
        .as_ref()
        .and_then(toolpulse::config::upstream_path_warning)
    {
        writeln!(stdout, "warning: {warning}")?;
    }
    if let Some(sample) = upstream_sample {
        let input =
            std::fs::read(sample).with_context(|| format!("cannot read {}", sample.display()))?;
        let names = toolpulse::features::unconfigured::in_stream(Arc::new(config), &input);
        write!(stdout, "{}", describe_unconfigured(sample, &names))?;
    }
    stdout.flush()?;
    Ok(())
}

/// What `check --upstream-sample` found, with the rule that would give those tools events.
fn describe_unconfigured(sample: &Path, names: &std::collections::BTreeSet<String>) -> String {
    let sample = sample.display();
    if names.is_empty() {
        return format!("upstream sample {sample}: no tool ran without a [[tools]] rule\n");
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    format!(
        "upstream sample {sample}: these tools ran as generic functions, without events, \
         because no [[tools]] rule names them:\n  {}\n\
         to show them (as MCP tools here; see `kind` in config/toolpulse.toml), add:\n{}\n",
        names.join("\n  "),
        toolpulse::features::unconfigured::rule(&names)
    )
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}
