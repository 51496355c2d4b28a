//! `kneepoint cleanup`: stop what an earlier run launched and left running.

use std::time::Duration;

use crate::args::CleanupArgs;

pub(crate) async fn run(args: &CleanupArgs) -> anyhow::Result<()> {
    if !(args.grace_s.is_finite() && args.grace_s > 0.0 && args.grace_s <= 3600.0) {
        anyhow::bail!("--grace-s must be above 0 and at most 3600");
    }
    local(args).await?;
    if let Some(region) = &args.sagemaker_region {
        sagemaker(args, region).await?;
    }
    Ok(())
}

/// The local servers kneepoint left.
async fn local(args: &CleanupArgs) -> anyhow::Result<()> {
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

/// The SageMaker resources kneepoint left in `region`.
async fn sagemaker(args: &CleanupArgs, region: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let api = kneepoint_transport::sagemaker::SageMakerApi::from_chain(
        region,
        args.sagemaker_api_url.as_deref(),
        None,
    )
    .await
    .context("loading AWS credentials")?;
    let left = kneepoint_deploy::find_sagemaker_leftovers(&api, args.all_hosts).await?;
    if left.is_empty() {
        println!("nothing to clean up on SageMaker in {region}");
        return Ok(());
    }
    for l in &left {
        println!(
            "{} SageMaker {} {} (launched by {})",
            if args.dry_run {
                "would delete"
            } else {
                "deleting"
            },
            l.kind,
            l.name,
            l.launcher
        );
    }
    if args.dry_run {
        return Ok(());
    }
    // An endpoint still being created cannot be deleted yet: waited for, up to an hour.
    let failed = kneepoint_deploy::remove_sagemaker_leftovers(
        &api,
        &left,
        std::time::Duration::from_secs(3600),
        std::time::Duration::from_secs(15),
    )
    .await;
    for (l, why) in &failed {
        eprintln!("could not delete SageMaker {} {}: {why}", l.kind, l.name);
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} SageMaker resources left",
            failed.len(),
            left.len()
        );
    }
    println!("deleted {} SageMaker resources", left.len());
    Ok(())
}
