//! Candidates launched as SageMaker real-time endpoints (`kind = "sagemaker"`): the spec
//! from `[candidates.deploy.sagemaker]` and the candidate, the control-plane client with the
//! AWS credential chain, and the launch.

use std::sync::Arc;

use kneepoint_deploy::{SageMakerDeployment, SageMakerSpec};
use kneepoint_runner::CancelToken;
use kneepoint_transport::sagemaker::SageMakerApi;

use crate::deploy_section::{DeploySection, SageMakerDeploySection};
use crate::error::{bail, Context};
use crate::expanded::Expanded;
use crate::Result;

/// The endpoint to create for candidate `e`.
pub(crate) fn spec(
    e: &Expanded,
    d: &DeploySection,
    s: &SageMakerDeploySection,
) -> Result<SageMakerSpec> {
    let c = &e.section;
    let Some(instance_type) = c.instance_type.clone() else {
        bail!(
            "candidate {:?}: a SageMaker candidate needs its instance_type (ml.g5.12xlarge, ...)",
            c.name
        );
    };
    let mut spec = SageMakerSpec::new(c.name.clone(), s.image.clone(), instance_type);
    for (k, v) in &s.environment {
        spec.env
            .insert(k.clone(), kneepoint_deploy::render(v, &e.values)?);
    }
    spec.execution_role_arn = s.execution_role_arn.clone();
    spec.model_data_url = s.model_data_url.clone();
    spec.instance_count = c.instance_count.unwrap_or(1);
    spec.startup_health_check_timeout_s = s.startup_health_check_timeout_s;
    if let Some(t) = d.ready_timeout_s {
        spec.ready_timeout = crate::expanded::seconds(&c.name, "ready_timeout_s", t, 86_400.0)?;
    }
    if let Some(p) = s.poll_s {
        spec.poll_interval = crate::expanded::seconds(&c.name, "poll_s", p, 86_400.0)?;
    }
    spec.validate()?;
    Ok(spec)
}

/// The region of candidate `e`'s endpoint: `[candidates.endpoint] region`, else
/// `AWS_REGION` / `AWS_DEFAULT_REGION`, else us-east-1 (as the data plane resolves it).
fn region(e: &Expanded) -> String {
    crate::aws::aws_region(e.section.endpoint.as_ref().and_then(|ep| ep.region.clone()))
}

/// Creates candidate `e`'s endpoint and waits until it is `InService`.
pub(crate) async fn launch(
    e: &Expanded,
    d: &DeploySection,
    s: &SageMakerDeploySection,
    cancel: &CancelToken,
) -> Result<SageMakerDeployment> {
    let spec = spec(e, d, s)?;
    let region = region(e);
    let profile = e
        .section
        .endpoint
        .as_ref()
        .and_then(|ep| ep.aws_profile.clone());
    let api = SageMakerApi::from_chain(&region, s.api_url.as_deref(), profile.as_deref())
        .await
        .context("loading AWS credentials (environment, ~/.aws files, web identity, container or instance metadata)")?;
    Ok(spec.launch(Arc::new(api), cancel).await?)
}
