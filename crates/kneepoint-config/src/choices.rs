//! Flags and file keys that name one of a few choices, parsed into enums at the edge: the flag
//! lists its choices in `--help` and is parsed by [`choice`]; the file's key is parsed the
//! same way by [`parsed`] (an unknown name is refused with the choices, at the key's line).
//! Also [`one`]: a file's single value where the flag takes a list.

use std::str::FromStr;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use serde::Deserialize;

/// A flag's value parser: lists `names` in `--help` and parses the chosen one into `T`.
pub(crate) fn choice<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Display,
{
    PossibleValuesParser::new(names).try_map(|s| s.parse::<T>().map_err(|e| e.to_string()))
}

/// A file key holding a string parsed as the flag parses it (`FromStr`), its error kept.
pub(crate) fn parsed<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// One value in the file (`url = "..."`, `prompt_input_tokens_mean = 512`), a list of one on
/// the flags' side (`--url` repeats, `--isl` takes a list).
pub(crate) fn one<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.map(|v| vec![v]))
}

/// The protocol the built-in simulator speaks (`--sim-protocol`, `[simulator] protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimProtocol {
    /// OpenAI-compatible HTTP (the default).
    OpenAi,
    /// SageMaker's runtime API (`InvokeEndpoint` and its streaming form).
    SageMaker,
}

impl FromStr for SimProtocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openai" => Ok(Self::OpenAi),
            "sagemaker" => Ok(Self::SageMaker),
            other => Err(format!(
                "the simulator protocol must be openai or sagemaker, not {other:?}"
            )),
        }
    }
}

/// What a search's answer maximises under (`--objective`, `[search_params] objective`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchObjective {
    /// Every SLA holds at its statistic (the default).
    Sla,
    /// The share of requests meeting every per-request SLO is at least the attainment.
    Goodput,
}

impl FromStr for SearchObjective {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sla" => Ok(Self::Sla),
            "goodput" => Ok(Self::Goodput),
            other => Err(format!(
                "objective {other:?} is not known: sla or goodput (a search_recipe of max-goodput-under-slo means goodput)"
            )),
        }
    }
}

/// How `recommend` spends launches (`--strategy`, `search_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchStrategy {
    /// Every combination (the default).
    Grid,
    /// Skip what cannot fit or win, screen, search fully what could win.
    Adaptive,
}

impl FromStr for SearchStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "grid" => Ok(Self::Grid),
            "adaptive" => Ok(Self::Adaptive),
            other => Err(format!(
                "search_strategy must be grid or adaptive, not {other:?}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Key {
        #[serde(default, deserialize_with = "parsed")]
        protocol: Option<SimProtocol>,
    }

    #[test]
    fn a_file_key_is_parsed_as_the_flag_is() {
        let k: Key = toml::from_str("protocol = \"sagemaker\"").unwrap();
        assert_eq!(k.protocol, Some(SimProtocol::SageMaker));
        let e = toml::from_str::<Key>("protocol = \"grpc\"").unwrap_err();
        assert!(e.to_string().contains("openai or sagemaker"), "{e}");
        assert!(toml::from_str::<Key>("").unwrap().protocol.is_none());
    }

    #[test]
    fn a_flag_lists_its_choices_and_parses_them() {
        let cmd =
            clap::Command::new("t").arg(clap::Arg::new("s").long("s").value_parser(choice::<
                SearchStrategy,
            >(
                &["grid", "adaptive"],
            )));
        let m = cmd
            .clone()
            .try_get_matches_from(["t", "--s", "adaptive"])
            .unwrap();
        assert_eq!(
            m.get_one::<SearchStrategy>("s"),
            Some(&SearchStrategy::Adaptive)
        );
        assert!(cmd.try_get_matches_from(["t", "--s", "random"]).is_err());
    }
}
