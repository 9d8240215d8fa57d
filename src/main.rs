//! The `flowc` binary: everything lives in the library's `cli` module.

fn main() -> std::process::ExitCode {
    flowc::cli::main()
}
