//! `kneepoint cleanup`: stop what an earlier run launched and left running.

use std::time::Duration;

use crate::args::CleanupArgs;

pub(crate) async fn run(args: &CleanupArgs) -> anyhow::Result<()> {
    if !(args.grace_s.is_finite() && args.grace_s > 0.0 && args.grace_s <= 3600.0) {
        anyhow::bail!("--grace-s must be above 0 and at most 3600");
    }
    let left = kneepoint_deploy::find_leftovers();
    if left.is_empty() {
        println!("nothing to clean up: no server launched by kneepoint outlived its run");
        return Ok(());
    }
    for l in &left {
        println!(
            "{} {} (process group {}, launched by pid {}): {}",
            if args.dry_run {
                "would stop"
            } else {
                "stopping"
            },
            l.candidate,
            l.pgid,
            l.launcher_pid,
            l.command
        );
    }
    if args.dry_run {
        return Ok(());
    }
    let failed =
        kneepoint_deploy::remove_leftovers(&left, Duration::from_secs_f64(args.grace_s)).await;
    for (l, why) in &failed {
        eprintln!(
            "could not stop {} (process group {}): {why}",
            l.candidate, l.pgid
        );
    }
    if !failed.is_empty() {
        anyhow::bail!("{} of {} left running", failed.len(), left.len());
    }
    println!("stopped {}", left.len());
    Ok(())
}
