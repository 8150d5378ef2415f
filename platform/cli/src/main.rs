//! The `wasmkeep` binary.

mod build;
mod client;
mod cluster;
mod config;
mod dev;
mod init;
mod manifest;
mod memory;
mod reload;
mod serve;
mod serve_config;

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

/// Error values (wasmtime makes one for every store it drops) capture a
/// backtrace when `RUST_BACKTRACE` is set, which costs more than the rest
/// of a front request. Panics keep theirs; `RUST_LIB_BACKTRACE=1` brings
/// errors' back.
fn quiet_error_backtraces() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: the first thing `main` does; no other thread exists yet.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
}

/// wasmkeep: stateful WebAssembly actors on WASI 0.2 components.
#[derive(Debug, Parser)]
#[command(name = "wasmkeep", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make a new app in ./NAME that `wasmkeep dev` runs at once.
    Init(init::InitArgs),
    /// Build an app and serve it on 127.0.0.1:8080 with the embedded store.
    Dev(dev::DevArgs),
    /// Run the hosted service: tenants sign up and deploy through the
    /// provisioning API; apps answer at <app>.<tenant>.<base domain>.
    Serve(Box<serve_config::ServeArgs>),
    /// Sign up as a tenant of a hosted node; saves the token and makes the
    /// node's API the current one.
    Signup(client::SignupArgs),
    /// Save a token for an API (`--api URL`) and make that API the current one.
    Login(client::LoginArgs),
    /// The current API, and the tenant and scope of its token.
    Whoami(client::WhoamiArgs),
    /// Build an app and deploy it to a hosted node; prints its URL.
    Deploy(client::DeployArgs),
    /// The tenant's apps.
    Apps(client::AppsArgs),
    /// An app's versions.
    Versions(client::VersionsArgs),
    /// Make an earlier version of an app active again.
    Rollback(client::RollbackArgs),
    /// An app's values (secrets).
    Values(client::ValuesArgs),
    /// The tenant's API tokens.
    Tokens(client::TokensArgs),
    /// An app's actors.
    Actors(client::ActorsArgs),
    /// An app's logs as its guests write them (stdout and stderr).
    Tail(client::TailArgs),
    /// Where the tenant's apps' spans go (its own OTLP endpoint).
    Telemetry(client::TelemetryArgs),
    /// What the tenant's apps used this month.
    Usage(client::UsageArgs),
    /// The operator's cluster tools (`cluster init`).
    Cluster(cluster::ClusterArgs),
    /// Drain a node (the operator's token): its actors and sockets move to
    /// the other nodes of its cluster, then it stops.
    Drain(client::DrainArgs),
    /// Print the shell's completion script: `wasmkeep completions bash >
    /// ~/.local/share/bash-completion/completions/wasmkeep`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The node's log output on stderr (`WASMKEEP_LOG`), and its traces
/// when `traces` names where they go. Spans of the request path never
/// reach the log output; with no traces, nothing records them.
fn observe(
    traces: Option<wasmkeep_telemetry::traces::TraceSettings>,
    tenants: Option<Arc<wasmkeep_telemetry::tenant_export::TenantExports>>,
    format: wasmkeep_telemetry::traces::LogFormat,
) -> Result<Option<wasmkeep_telemetry::traces::Tracing>, String> {
    use tracing_subscriber::util::SubscriberInitExt;
    use wasmkeep_telemetry::traces::{Tracing, colour_on_stderr, with_spans, without_spans};
    let directives = std::env::var("WASMKEEP_LOG").unwrap_or_else(|_| "warn,wasmkeep=info".into());
    let started = match traces {
        Some(settings) => Tracing::start(&settings, tenants)?,
        None => None,
    };
    Ok(match started {
        Some((tracing, spans)) => {
            with_spans(&directives, format, std::io::stderr, colour_on_stderr(), spans).init();
            Some(tracing)
        }
        None => {
            without_spans(&directives, format, std::io::stderr, colour_on_stderr()).init();
            None
        }
    })
}

/// The runtime's workers for each core. A guest holds its worker for a
/// whole poll (up to an epoch tick), and guests hold at most the node's
/// guest turns (`guests_at_once`, the cores): with as many workers again,
/// a request's own tasks (its socket, its answer) find a worker free
/// while guests compute, rather than queueing behind their polls.
const WORKERS_PER_CORE: usize = 2;

fn main() -> ExitCode {
    quiet_error_backtraces();
    memory::tune_allocator();
    // Before any thread starts: each inherits the calling thread's slice.
    wasmkeep_runtime::slices::shorten();
    let cli = Cli::parse();
    // The commands that need no runtime.
    match &cli.command {
        Command::Init(_) | Command::Completions { .. } => return offline(cli.command),
        _ => {}
    }
    // Traces are a server's: `serve` reads where they go from its
    // configuration, `dev` from the standard variables.
    use wasmkeep_telemetry::traces::{LogFormat, TraceSettings};
    // The configuration is read once here for what must start before the
    // runtime; an error in it is told by `serve` itself.
    let serving = match &cli.command {
        Command::Serve(args) => serve_config::ServeConfig::load(args).ok(),
        _ => None,
    };
    let (traces, format) = match (&cli.command, &serving) {
        (Command::Serve(_), Some(cfg)) => {
            (Some(cfg.telemetry.traces(cfg.cluster.node_id.as_deref())), cfg.telemetry.log_format)
        }
        (Command::Dev(_), _) => (Some(TraceSettings::default()), LogFormat::Text),
        _ => (None, LogFormat::Text),
    };
    let tenants = match &serving {
        Some(cfg) => {
            let roots = cfg.egress_roots.as_ref().map(std::fs::read).transpose().unwrap_or_default();
            match cfg.telemetry.tenant_exports(&roots.unwrap_or_default()) {
                Ok(exports) => exports,
                Err(e) => {
                    eprintln!("error: [telemetry] tenant_export: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => None,
    };
    let _tracing = match observe(traces, tenants.clone(), format) {
        Ok(tracing) => tracing,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    memory::start_trimming();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS_PER_CORE * cores)
        .enable_all()
        .build()
        .expect("starting tokio");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Dev(args) => dev::run(args).await,
            Command::Serve(args) => serve::run(*args, tenants).await,
            Command::Signup(args) => client::signup(args).await,
            Command::Deploy(args) => client::deploy(args).await,
            Command::Login(args) => client::login(args).await,
            Command::Whoami(args) => client::whoami(args).await,
            Command::Apps(args) => client::apps(args).await,
            Command::Versions(args) => client::versions(args).await,
            Command::Rollback(args) => client::rollback(args).await,
            Command::Telemetry(args) => client::telemetry(args).await,
            Command::Usage(args) => client::usage(args).await,
            Command::Values(args) => client::values(args).await,
            Command::Tokens(args) => client::tokens(args).await,
            Command::Actors(args) => client::actors(args).await,
            Command::Tail(args) => client::tail(args).await,
            Command::Cluster(args) => cluster::run(args),
            Command::Drain(args) => client::drain(args).await,
            Command::Init(_) | Command::Completions { .. } => unreachable!("run without the runtime"),
        }
    });
    exit(result)
}

/// `init` and `completions`: files and text, no node, no runtime.
fn offline(command: Command) -> ExitCode {
    let result = match command {
        Command::Init(args) => init::run(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "wasmkeep", &mut std::io::stdout());
            Ok(())
        }
        _ => unreachable!("only the offline commands"),
    };
    exit(result)
}

fn exit(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasmkeep: {e}");
            ExitCode::FAILURE
        }
    }
}
