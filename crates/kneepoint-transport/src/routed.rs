//! Several models (LoRA adapters served by name) and several endpoints (replicas) behind one
//! transport: each request goes to one target, chosen by a rule that depends only on the
//! request, so that [`Transport::route`] names the target [`Transport::send`] uses and a run
//! can be reproduced.

use std::sync::Arc;

use kneepoint_core::{Error as RequestError, EventStream, Request, Route, Transport};

use crate::Error;

/// How a request's target is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteRule {
    /// Targets in turn by request id (a conversation's turns by its id: they stay together).
    RoundRobin,
    /// Each target with a probability proportional to its weight (a hash of the request id,
    /// so the choice is the same every time the request is routed).
    Weighted,
    /// Every turn of a conversation to the same target (by a hash of the conversation id,
    /// weighted); a request that is no turn is routed by its id, weighted.
    Sticky,
}

impl std::str::FromStr for RouteRule {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "round-robin" | "round_robin" => Ok(RouteRule::RoundRobin),
            "weighted" | "random" => Ok(RouteRule::Weighted),
            "sticky" => Ok(RouteRule::Sticky),
            other => Err(Error::InvalidRoutes {
                reason: format!("unknown rule {other:?} (round-robin, weighted, sticky)"),
            }),
        }
    }
}

/// One target: a transport that sends to one model on one endpoint, and its weight.
pub struct RouteTarget {
    /// Sends to this target.
    pub transport: Arc<dyn Transport>,
    /// What the records say served the request.
    pub route: Route,
    /// Relative share of the requests under [`RouteRule::Weighted`] and [`RouteRule::Sticky`].
    pub weight: f64,
}

/// Spreads requests over several [`RouteTarget`]s.
pub struct RoutedTransport {
    targets: Vec<RouteTarget>,
    /// Cumulative weights, normalised to end at 1.
    cumulative: Vec<f64>,
    rule: RouteRule,
}

impl std::fmt::Debug for RoutedTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedTransport")
            .field(
                "routes",
                &self.targets.iter().map(|t| &t.route).collect::<Vec<_>>(),
            )
            .field("rule", &self.rule)
            .finish()
    }
}

/// A 64-bit mix of `x` (splitmix64's finaliser), mapped to [0, 1).
fn unit(x: u64) -> f64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// FNV-1a of a string (stable across runs and platforms).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl RoutedTransport {
    /// Spreads requests over `targets` by `rule`. Fails without a target, or on a weight that
    /// is not a positive finite number. The routes' URLs are recorded without credentials or
    /// query strings.
    pub fn new(mut targets: Vec<RouteTarget>, rule: RouteRule) -> Result<Self, Error> {
        for t in &mut targets {
            t.route.url = crate::redact_url(&t.route.url);
        }
        if targets.is_empty() {
            return Err(Error::InvalidRoutes {
                reason: "no target".into(),
            });
        }
        if let Some(t) = targets
            .iter()
            .find(|t| !(t.weight.is_finite() && t.weight > 0.0))
        {
            return Err(Error::InvalidRoutes {
                reason: format!(
                    "the weight of {} on {} must be a positive number, not {}",
                    t.route.model, t.route.url, t.weight
                ),
            });
        }
        let total: f64 = targets.iter().map(|t| t.weight).sum();
        let mut acc = 0.0;
        let cumulative = targets
            .iter()
            .map(|t| {
                acc += t.weight / total;
                acc
            })
            .collect();
        Ok(RoutedTransport {
            targets,
            cumulative,
            rule,
        })
    }

    /// The targets, in order.
    pub fn targets(&self) -> &[RouteTarget] {
        &self.targets
    }

    fn weighted(&self, u: f64) -> usize {
        self.cumulative
            .iter()
            .position(|c| u < *c)
            .unwrap_or(self.targets.len() - 1)
    }

    /// The index of the target `request` goes to. Whatever the rule, every turn of a
    /// conversation goes where its conversation does (its history is that target's): the
    /// rule spreads conversations, keyed by their id, as it spreads single requests by theirs.
    pub fn choose(&self, request: &Request) -> usize {
        let key = request
            .turn
            .as_ref()
            .map_or(request.id, |t| fnv(&t.conversation_id));
        match self.rule {
            RouteRule::RoundRobin => (key % self.targets.len() as u64) as usize,
            RouteRule::Weighted | RouteRule::Sticky => self.weighted(unit(key)),
        }
    }

    fn target(&self, request: &Request) -> &RouteTarget {
        &self.targets[self.choose(request)]
    }
}

#[async_trait::async_trait]
impl Transport for RoutedTransport {
    async fn send(&self, request: &Request) -> Result<EventStream, RequestError> {
        self.target(request).transport.send(request).await
    }

    fn payload(&self, request: &Request) -> Option<serde_json::Value> {
        self.target(request).transport.payload(request)
    }

    fn request_id(&self, request: &Request) -> Option<String> {
        self.target(request).transport.request_id(request)
    }

    fn route(&self, request: &Request) -> Option<Route> {
        Some(self.target(request).route.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::{iter_stream, Turn};

    struct Nothing;
    #[async_trait::async_trait]
    impl Transport for Nothing {
        async fn send(&self, _r: &Request) -> Result<EventStream, RequestError> {
            Ok(Box::pin(iter_stream(Vec::new())))
        }
    }

    fn targets(weights: &[f64]) -> Vec<RouteTarget> {
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| RouteTarget {
                transport: Arc::new(Nothing),
                route: Route {
                    model: format!("m{i}"),
                    url: "http://127.0.0.1:1".into(),
                },
                weight: *w,
            })
            .collect()
    }

    #[test]
    fn rules_spread_requests_as_asked_and_the_same_way_every_time() {
        let rr = RoutedTransport::new(targets(&[1.0, 1.0, 1.0]), RouteRule::RoundRobin).unwrap();
        let ids: Vec<usize> = (0..6).map(|i| rr.choose(&Request::text(i, "x"))).collect();
        assert_eq!(ids, vec![0, 1, 2, 0, 1, 2]);
        let w = RoutedTransport::new(targets(&[3.0, 1.0]), RouteRule::Weighted).unwrap();
        let n = 20_000;
        let first = (0..n)
            .filter(|&i| w.choose(&Request::text(i, "x")) == 0)
            .count();
        // 3:1 within a wide margin (binomial sd ~ 0.3 %)
        assert!((first as f64 / n as f64 - 0.75).abs() < 0.02, "{first}");
        let r = Request::text(17, "x");
        assert_eq!(w.choose(&r), w.choose(&r));
        assert_eq!(w.route(&r).unwrap().model, format!("m{}", w.choose(&r)));
        // every rule: every turn of a conversation to one target (a trace's sessions meet the
        // default round-robin)
        for rule in [
            RouteRule::Sticky,
            RouteRule::RoundRobin,
            RouteRule::Weighted,
        ] {
            let s = RoutedTransport::new(targets(&[1.0, 1.0]), rule).unwrap();
            for c in 0..50 {
                let turn = |id: u64, k: u32| {
                    let mut r = Request::text(id, "x");
                    r.turn = Some(Turn {
                        conversation_id: format!("conversation_{c}"),
                        turn_index: k,
                        delay: std::time::Duration::ZERO,
                        history_in_prompt: None,
                    });
                    r
                };
                let picks: Vec<usize> = (0..4)
                    .map(|k| s.choose(&turn(c * 10 + k as u64, k)))
                    .collect();
                assert!(picks.iter().all(|p| *p == picks[0]), "{picks:?}");
            }
        }
    }

    #[test]
    fn route_urls_carry_no_credentials() {
        let mut t = targets(&[1.0]);
        t[0].route.url = "https://user:secret@host:8000/v1?key=abc".into();
        let r = RoutedTransport::new(t, RouteRule::RoundRobin).unwrap();
        let url = r.route(&Request::text(0, "x")).unwrap().url;
        assert!(!url.contains("secret") && !url.contains("abc"), "{url}");
        assert!(!format!("{r:?}").contains("secret"));
    }

    #[test]
    fn bad_routes_are_refused() {
        assert!(RoutedTransport::new(Vec::new(), RouteRule::RoundRobin).is_err());
        let e = RoutedTransport::new(targets(&[1.0, 0.0]), RouteRule::Weighted).unwrap_err();
        assert!(e.to_string().contains("positive"), "{e}");
        assert!("sticky".parse::<RouteRule>().is_ok());
        assert!("fastest".parse::<RouteRule>().is_err());
    }
}
