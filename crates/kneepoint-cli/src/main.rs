//! The `kneepoint` binary: a thin wrapper over [`kneepoint_cli::main_with_args`].
fn main() -> std::process::ExitCode {
    kneepoint_cli::main_with_args(std::env::args_os())
}
