//! The `synthkit` command: answer questions over files with LlamaIndex-style response
//! synthesis, offline (extractive) or with an OpenAI-compatible model.
//!
//! `main` only parses the arguments, runs the verb and turns errors into exit codes
//! (0 success, 2 usage errors, 1 anything else); the work lives in the modules, in four
//! tiers whose imports run one way, as ripgrep's do: the verbs use the services, the
//! settings and the flags, the services use the settings and the flags (and each other, one
//! way), `settings` (the one conversion from flags to built things) uses only the flags
//! (and the leaf `say`), and `flags` imports nothing else of the command. Every verb
//! takes its whole run from `settings` ([`settings::SynthRun`], [`settings::BatchRun`],
//! [`settings::EvalRun`], `settings::ServeRun`, [`settings::text`]), never a clap struct.
//! The verbs never import each other: what two of them share is a service.

// Every flag of every verb, with its parsers and defaults.
mod flags;

// The one conversion from flags to built things (the options and the model setup that
// several verbs build).
mod settings;

// Notes and warnings on standard error: a leaf every tier may use.
mod say;

// The services the verbs share: reading (input, nodes), the model and its
// stack, plans, progress, output, traces, report pages, JSON-lines files, errors.
mod backend;
mod error;
mod images;
mod input;
mod logging;
mod node_json;
mod observe;
mod output;
mod pace;
mod pages;
mod plan;
mod progress;
mod spinner;
mod trace;

// The verbs: ask and summarize (synthesis), tokens and split (text), batch, eval, serve,
// report.
mod batch;
mod eval;
mod report;
#[cfg(feature = "serve")]
mod serve;
mod synthesis;
mod text;

use std::process::ExitCode;

use clap::Parser;

use crate::flags::{Cli, Command};
use crate::settings::text::{ReportRun, SplitRun, TokensRun};
use crate::settings::{BatchRun, EvalRun, SynthRun};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(error::EXIT_USAGE));
        }
    };
    let otel = match logging::init(cli.verbose, cli.command.quiet(), cli.command.otel()) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("error: {}", error::message(&e));
            return ExitCode::from(error::exit_code(&e));
        }
    };
    let code = match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error::message(&e));
            ExitCode::from(error::exit_code(&e))
        }
    };
    // The answer is out: flush the spans (bounded; a failure is a warning).
    drop(otel);
    code
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Tokens(a) => text::tokens(&TokensRun::of(a)),
        Command::Split(a) => text::split(&SplitRun::of(a)?),
        Command::Ask(a) => block_on(synthesis::run(&SynthRun::ask(&a)?)),
        Command::Summarize(a) => block_on(synthesis::run(&SynthRun::summarize(&a)?)),
        Command::Batch(a) => block_on(batch::run(&BatchRun::of(&a)?)),
        Command::Eval(a) => block_on(eval::run(EvalRun::of(&a)?)),
        Command::Report(a) => report::run(&ReportRun::of(a)),
        #[cfg(feature = "serve")]
        Command::Serve(a) => serve::run(settings::ServeRun::of(&a)?),
        #[cfg(not(feature = "serve"))]
        Command::Serve(_) => Err(crate::error::usage(flags::NO_SERVE)),
    }
}

fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(future: F) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(future)
}

/// Output cut short by a closed pipe (`synthkit ... | head`) is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
