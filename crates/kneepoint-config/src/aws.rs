//! How AWS settings are found when not given, as the AWS SDKs find them.

/// The AWS region: `given` (a flag or the file), else `AWS_REGION`, else `AWS_DEFAULT_REGION`,
/// else us-east-1, as the AWS SDKs resolve it (an empty variable counts as unset).
pub(crate) fn aws_region(given: Option<String>) -> String {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    given
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".into())
}
