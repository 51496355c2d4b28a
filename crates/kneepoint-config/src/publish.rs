//! What happens to an artifact folder after the run: a `.tar.gz` beside it (`--archive`),
//! uploaded to S3 (`--output-s3 s3://bucket/prefix`) with the AWS credential chain, or to an
//! S3-compatible server (`--s3-endpoint-url`, else `AWS_ENDPOINT_URL_S3` /
//! `AWS_ENDPOINT_URL`, as the AWS SDKs read them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
#[cfg(feature = "sagemaker")]
use kneepoint_transport::s3::S3Location;
use merge::Merge;
use serde::Deserialize;

use crate::error::Context;
use crate::Result;

/// The flags.
#[derive(Debug, Clone, Default, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct PublishArgs {
    /// Write a .tar.gz of the artifact folder beside it when the run ends.
    #[arg(long)]
    #[serde(default)]
    #[merge(strategy = merge::bool::overwrite_false)]
    pub archive: bool,
    /// Upload that archive to S3 (implies --archive): s3://bucket/prefix.
    #[arg(long, value_name = "S3_URL")]
    #[serde(rename = "s3")]
    pub output_s3: Option<String>,
    /// An S3-compatible server instead of AWS (path-style), e.g. http://127.0.0.1:9000.
    #[arg(long, value_name = "URL")]
    pub s3_endpoint_url: Option<String>,
    /// Region of the bucket (else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1).
    #[arg(long, value_name = "REGION")]
    pub s3_region: Option<String>,
    /// Archives above this many MiB go up as a multipart upload in parts of this size
    /// (default 64; at least 5, S3's smallest part).
    #[arg(long, value_name = "MIB")]
    #[serde(skip)]
    pub s3_part_size_mib: Option<u64>,
    /// Record the run in this results store when it ends: postgres://..., sqlite://PATH or a
    /// file (default: $KNEEPOINT_STORE, else $XDG_DATA_HOME/kneepoint/results.db).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Do not record the run in the results store.
    #[arg(long, conflicts_with = "store")]
    #[serde(default)]
    #[merge(strategy = merge::bool::overwrite_false)]
    pub no_store: bool,
    /// A KEY=VALUE label stored with the run (repeatable; `history --label` finds it). In
    /// the file: `labels = ["team=infra"]`; a flag wins over the file's label of that key.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    #[serde(default, rename = "labels")]
    #[merge(strategy = crate::options::append)]
    pub labels: Vec<String>,
}

/// `[output]`: the same group as the archive flags ([`PublishArgs`]; the file's `s3` is
/// `--output-s3`; the part size is a flag only).
pub type OutputSection = PublishArgs;

/// The resolved publishing settings.
#[derive(Debug, Clone, Default)]
pub struct Publish {
    /// Write the archive.
    pub archive: bool,
    /// Upload it here (feature `sagemaker`, which brings the AWS client).
    #[cfg(feature = "sagemaker")]
    pub s3: Option<S3Location>,
    /// An S3-compatible server.
    pub endpoint: Option<String>,
    /// The bucket's region.
    pub region: String,
    /// The AWS profile for credentials.
    pub profile: Option<String>,
    /// Part size of multipart uploads (default 64 MiB).
    pub part_size: Option<usize>,
    /// The results store asked for (`--store`, `[output] store`); `None`: the default.
    pub store: Option<String>,
    /// `--no-store`.
    pub no_store: bool,
    /// The labels, each key once (a flag's before the file's).
    pub labels: BTreeMap<String, String>,
}

/// What [`Publish::run`] did.
#[derive(Debug, Clone)]
pub struct Published {
    /// The archive.
    pub archive: PathBuf,
    /// Files in it.
    pub files: u64,
    /// Its size.
    pub bytes: u64,
    /// `s3://bucket/key` and the ETag, when uploaded.
    pub uploaded: Option<(String, String)>,
}

/// `KEY=VALUE`: a key of letters, digits, `_`, `-`, `.` or `/` (at most 64), a value of at
/// most 256 characters.
pub fn parse_label(label: &str) -> Result<(String, String)> {
    let Some((k, v)) = label.split_once('=') else {
        crate::error::bail!("--label {label:?}: write KEY=VALUE, e.g. --label team=infra");
    };
    let (k, v) = (k.trim(), v.trim());
    let key_ok = !k.is_empty()
        && k.len() <= 64
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    if !key_ok {
        crate::error::bail!(
            "--label {label:?}: the key must be 1 to 64 letters, digits, '_', '-', '.' or '/'"
        );
    }
    if v.chars().count() > 256 || v.chars().any(char::is_control) {
        crate::error::bail!(
            "--label {label:?}: the value must be at most 256 printable characters"
        );
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// `KEY=VALUE` labels, each read by [`parse_label`], as a map. A key given twice is an error
/// naming the key and both labels ("--label team given twice: team=a and team=b"), not a
/// silent choice of one of them.
pub fn parse_labels(labels: &[String]) -> Result<BTreeMap<String, String>> {
    labels_of(labels, "--label")
}

/// [`parse_labels`], with `what` naming where the labels came from in the message.
fn labels_of(labels: &[String], what: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for l in labels {
        let (k, v) = parse_label(l)?;
        if let Some(first) = out.get(&k) {
            crate::error::bail!("{what} {k} given twice: {k}={first} and {k}={v}");
        }
        out.insert(k, v);
    }
    Ok(out)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Publish {
    /// Resolves the flags over `[output]`.
    pub fn resolve(
        args: &PublishArgs,
        file: Option<&OutputSection>,
        profile: Option<String>,
    ) -> Result<Self> {
        let p = crate::flags_over(args, &file.cloned().unwrap_or_default());
        let s3 = p.output_s3.clone();
        #[cfg(feature = "sagemaker")]
        let s3 = s3.map(|u| S3Location::parse(&u)).transpose()?;
        #[cfg(not(feature = "sagemaker"))]
        if s3.is_some() {
            crate::error::bail!("this build cannot upload to S3: build kneepoint-config with its `sagemaker` feature (the AWS client)");
        }
        let part_size = match p.s3_part_size_mib {
            Some(m) if m < 5 => {
                crate::error::bail!("--s3-part-size-mib must be at least 5 (S3's smallest part)")
            }
            Some(m) => Some(usize::try_from(m.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)),
            None => None,
        };
        // Each source says a key once; a flag wins over the file's label of that key.
        let mut labels = parse_labels(&args.labels)?;
        if let Some(f) = file {
            for (k, v) in labels_of(&f.labels, "[output] labels:")? {
                labels.entry(k).or_insert(v);
            }
        }
        Ok(Publish {
            store: p.store.clone(),
            no_store: p.no_store,
            labels,
            archive: p.archive || s3.is_some(),
            #[cfg(feature = "sagemaker")]
            s3,
            endpoint: p
                .s3_endpoint_url
                .clone()
                .or_else(|| env("AWS_ENDPOINT_URL_S3"))
                .or_else(|| env("AWS_ENDPOINT_URL")),
            region: crate::aws::aws_region(p.s3_region.clone()),
            profile,
            part_size,
        })
    }

    /// Archives `dir` (and uploads the archive) when asked; `None` when nothing was asked.
    pub async fn run(&self, dir: &Path) -> Result<Option<Published>> {
        if !self.archive {
            return Ok(None);
        }
        let (archive, files) = kneepoint_engine::write_archive(dir)?;
        let bytes = std::fs::metadata(&archive)
            .with_context(|| format!("reading {}", archive.display()))?
            .len();
        #[cfg(feature = "sagemaker")]
        let uploaded = self.upload(&archive).await?;
        #[cfg(not(feature = "sagemaker"))]
        let uploaded = None;
        Ok(Some(Published {
            archive,
            files,
            bytes,
            uploaded,
        }))
    }

    /// Uploads the archive when an S3 location was given: its `s3://` URL and ETag.
    #[cfg(feature = "sagemaker")]
    async fn upload(&self, archive: &Path) -> Result<Option<(String, String)>> {
        use kneepoint_transport::s3::S3Client;
        use kneepoint_transport::sagemaker::AwsCredentialChain;
        use std::sync::Arc;
        let Some(loc) = &self.s3 else {
            return Ok(None);
        };
        let body =
            std::fs::read(archive).with_context(|| format!("reading {}", archive.display()))?;
        let creds = AwsCredentialChain::load(&self.region, self.profile.as_deref()).await?;
        let mut client = S3Client::new(
            &self.region,
            self.endpoint.as_deref(),
            Arc::new(creds),
            &kneepoint_transport::ConnectOptions::default(),
        )?;
        if let Some(p) = self.part_size {
            client = client.with_part_size(p);
        }
        let name = archive
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = loc.key(&name);
        let etag = client.put(&loc.bucket, &key, body.into()).await?;
        Ok(Some((format!("s3://{}/{key}", loc.bucket), etag)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(labels: &[&str]) -> PublishArgs {
        PublishArgs {
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_label_key_given_twice_is_refused_naming_both() {
        let e = Publish::resolve(&flags(&["team=a", "ci=7", "team=b"]), None, None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--label team given twice: team=a and team=b");
        let e = Publish::resolve(&flags(&[]), Some(&flags(&["env=x", "env=y"])), None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "[output] labels: env given twice: env=x and env=y");
        // a flag still wins over the file's label of that key
        let p = Publish::resolve(
            &flags(&["team=a"]),
            Some(&flags(&["team=b", "env=x"])),
            None,
        )
        .unwrap();
        assert_eq!(p.labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(p.labels.get("env").map(String::as_str), Some("x"));
        let both = parse_labels(&["a=1".to_owned(), "b = 2".to_owned()]).unwrap();
        assert_eq!(both.get("b").map(String::as_str), Some("2"));
        assert!(parse_labels(&["a=1".to_owned(), "a=1".to_owned()]).is_err());
    }
}
