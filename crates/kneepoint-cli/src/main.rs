//! The `kneepoint` binary: a thin wrapper over [`kneepoint_cli::main_with_args`].
/// The binary's allocator: mimalloc (see `docs/PERFORMANCE.md`, session 7).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kneepoint_cli::main_with_args(std::env::args_os())
}
