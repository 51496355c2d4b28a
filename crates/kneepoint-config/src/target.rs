//! What a run sends its requests to: one enum, holding the one configuration its protocol
//! uses (there is no second copy to drift).

use kneepoint_sim::SimProfile;
use kneepoint_transport::{Api, ConnectOptions, OpenAiConfig};

#[cfg(feature = "sagemaker")]
use crate::SageMakerSettings;

/// What the run sends to. Each case carries the one client configuration it is reached with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Target {
    /// The built-in simulator, started in-process on a loopback port, speaking `protocol`
    /// (whose URL is filled in once the simulator listens).
    Simulator {
        /// The simulated engine and hardware (boxed: it is large beside an endpoint's case).
        profile: Box<SimProfile>,
        /// The protocol it speaks, and the client's settings for it.
        protocol: Protocol,
    },
    /// An endpoint somebody else runs: an OpenAI-compatible server (or several, routed) or a
    /// SageMaker endpoint.
    Endpoint(Protocol),
}

/// The protocol a target speaks, with the client's configuration for it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Protocol {
    /// OpenAI-compatible HTTP (chat, completions, or a pooling API).
    OpenAi {
        /// The client's configuration (with several routes: the primary URL and model).
        config: OpenAiConfig,
        /// Several models and/or URLs to spread requests over; `None`: one of each.
        routes: Option<RoutesPlan>,
    },
    /// The SageMaker runtime (`InvokeEndpoint`, `InvokeEndpointWithResponseStream`); feature
    /// `sagemaker`.
    #[cfg(feature = "sagemaker")]
    SageMaker(SageMakerSettings),
}

/// Several models and/or endpoints to spread requests over (`--model a,b`, `--url` repeated).
#[derive(Debug, Clone, PartialEq)]
pub struct RoutesPlan {
    /// The endpoints; empty: the target's own (the built-in simulator's).
    pub urls: Vec<String>,
    /// The model names and their weights.
    pub models: Vec<(String, f64)>,
    /// How a request's target is chosen.
    pub rule: kneepoint_transport::RouteRule,
}

impl Target {
    /// The protocol the target speaks.
    pub fn protocol(&self) -> &Protocol {
        match self {
            Target::Simulator { protocol, .. } | Target::Endpoint(protocol) => protocol,
        }
    }

    /// The simulator's profile, when the target is the built-in simulator.
    pub fn simulator(&self) -> Option<&SimProfile> {
        match self {
            Target::Simulator { profile, .. } => Some(profile),
            Target::Endpoint(_) => None,
        }
    }

    /// Whether the target publishes a Prometheus page of its own: an OpenAI-compatible
    /// server or the simulator speaking OpenAI does; SageMaker (and the simulator speaking
    /// its protocol) does not.
    pub fn has_metrics(&self) -> bool {
        matches!(self.protocol(), Protocol::OpenAi { .. })
    }
}

impl Protocol {
    /// The OpenAI-compatible client configuration, when the protocol is OpenAI's.
    pub fn openai(&self) -> Option<&OpenAiConfig> {
        match self {
            Protocol::OpenAi { config, .. } => Some(config),
            #[cfg(feature = "sagemaker")]
            Protocol::SageMaker(_) => None,
        }
    }

    /// The SageMaker settings, when the protocol is SageMaker's.
    #[cfg(feature = "sagemaker")]
    pub fn sagemaker(&self) -> Option<&SageMakerSettings> {
        match self {
            #[cfg(feature = "sagemaker")]
            Protocol::SageMaker(s) => Some(s),
            Protocol::OpenAi { .. } => None,
        }
    }

    /// The routes, when requests are spread over several models or URLs.
    pub fn routes(&self) -> Option<&RoutesPlan> {
        match self {
            Protocol::OpenAi { routes, .. } => routes.as_ref(),
            #[cfg(feature = "sagemaker")]
            Protocol::SageMaker(_) => None,
        }
    }

    /// Whether responses are streamed (needed for TTFT and ITL).
    pub fn streaming(&self) -> bool {
        match self {
            Protocol::OpenAi { config, .. } => config.streaming,
            #[cfg(feature = "sagemaker")]
            Protocol::SageMaker(s) => s.config.streaming,
        }
    }

    /// The OpenAI API the requests use (SageMaker: the one its body format follows).
    pub fn api(&self) -> Api {
        match self {
            Protocol::OpenAi { config, .. } => config.api,
            #[cfg(feature = "sagemaker")]
            Protocol::SageMaker(s) => match s.config.body {
                kneepoint_transport::sagemaker::BodyFormat::OpenAiCompletions => Api::Completions,
                _ => Api::Chat,
            },
        }
    }

    /// The model named in each request (empty: asked of the server when the run starts).
    pub fn model(&self) -> &str {
        match self {
            Protocol::OpenAi { config, .. } => &config.model,
            #[cfg(feature = "sagemaker")]
            Protocol::SageMaker(s) => &s.config.model,
        }
    }

    /// TLS, proxy and source-address options of the client.
    pub fn connect(&self) -> &ConnectOptions {
        match self {
            Protocol::OpenAi { config, .. } => &config.connect,
            #[cfg(feature = "sagemaker")]
            Protocol::SageMaker(s) => &s.config.connect,
        }
    }
}
