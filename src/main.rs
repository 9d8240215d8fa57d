//! The `flowc` binary: everything lives in the library's command line
//! ([`flowc::run_cli`]).

/// Compiling a program allocates many small nodes; mimalloc is markedly
/// faster at that than the system allocator (see the front-end benchmark).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    flowc::run_cli()
}
