//! Where cluster state comes from: a `kubectl get pods,services,endpointslices,nodes -A -o json` file
//! (`--cluster-state`), or the live API (`--kubeconfig FILE`, `--in-cluster`). Both give the same
//! [`ClusterState`]; they differ in how fresh it is, which every record says (`identity_source`,
//! `identity_age_s`, `identity_stale`).
use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{
    cluster::{ClusterError, ClusterState},
    watch::{LiveCluster, LiveOptions, WatchStartError},
};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot read the cluster state file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "the cluster state file {path} is not the output of `kubectl get pods,services,endpointslices,nodes -A -o json`: {error}"
    )]
    Parse { path: PathBuf, error: ClusterError },
    #[error("cannot read the kubeconfig {path}: {}", first_line(error))]
    Kubeconfig {
        path: PathBuf,
        error: kube::config::KubeconfigError,
    },
    #[error("cannot use the kubeconfig {path}: {error}")]
    KubeconfigUse {
        path: PathBuf,
        error: kube::config::KubeconfigError,
    },
    #[error(
        "--in-cluster: no service-account config: {0} (run the tracer in a pod with a service account, or pass --kubeconfig)"
    )]
    InCluster(kube::config::InClusterError),
    #[error(transparent)]
    Watch(#[from] WatchStartError),
}

/// The cluster state as of now, and how much to trust it.
#[derive(Clone)]
pub struct ClusterView {
    pub state: Arc<ClusterState>,
    /// `file` or `api`.
    pub source: &'static str,
    pub age: Duration,
    pub stale: bool,
}

pub enum ClusterSource {
    File {
        state: Arc<ClusterState>,
        written: SystemTime,
    },
    Live(LiveCluster),
}

/// One sentence: the YAML parser's message comes with a multi-line excerpt of the file.
fn first_line(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.trim().trim_end_matches(':').to_string()
}

impl ClusterSource {
    pub fn from_file(path: &Path) -> Result<ClusterSource, SourceError> {
        let read_err = |error| SourceError::Read {
            path: path.to_owned(),
            error,
        };
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        let written = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(read_err)?;
        let state = ClusterState::from_kubectl_json(&text).map_err(|error| SourceError::Parse {
            path: path.to_owned(),
            error,
        })?;
        Ok(ClusterSource::File {
            state: Arc::new(state),
            written,
        })
    }

    /// Live list+watch with the cluster, user and context a kubeconfig file names as current;
    /// `node`: this node's name (only its pods are followed).
    pub async fn from_kubeconfig(path: &Path, node: &str) -> Result<ClusterSource, SourceError> {
        let kubeconfig = Kubeconfig::read_from(path).map_err(|error| SourceError::Kubeconfig {
            path: path.to_owned(),
            error,
        })?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|error| SourceError::KubeconfigUse {
                    path: path.to_owned(),
                    error,
                })?;
        Ok(ClusterSource::Live(LiveCluster::start(
            config,
            LiveOptions::new(node),
        )?))
    }

    /// Live list+watch with the pod's service account; `node`: this node's name.
    pub fn in_cluster(node: &str) -> Result<ClusterSource, SourceError> {
        let config = kube::Config::incluster().map_err(SourceError::InCluster)?;
        Ok(ClusterSource::Live(LiveCluster::start(
            config,
            LiveOptions::new(node),
        )?))
    }

    pub fn view(&self) -> ClusterView {
        match self {
            ClusterSource::File { state, written } => ClusterView {
                state: Arc::clone(state),
                source: "file",
                age: SystemTime::now()
                    .duration_since(*written)
                    .unwrap_or_default(),
                stale: false,
            },
            ClusterSource::Live(live) => {
                let v = live.view();
                ClusterView {
                    state: v.state,
                    source: "api",
                    age: v.age,
                    stale: v.stale,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file for the test to read, removed when dropped.
    fn temp(name: &str, text: &str) -> tempfile::TempPath {
        let mut file = tempfile::Builder::new()
            .prefix("tracer-source-")
            .suffix(&format!("-{name}"))
            .tempfile()
            .expect("a temporary file");
        std::io::Write::write_all(&mut file, text.as_bytes()).expect("write temp file");
        file.into_temp_path()
    }

    #[test]
    fn a_malformed_snapshot_file_is_a_clear_error() {
        let path = temp(
            "bad.json",
            r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"namespace":"x"}}]}"#,
        );
        let Err(err) = ClusterSource::from_file(&path) else {
            panic!("must fail")
        };
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(
            msg.contains("kubectl get pods,services,endpointslices,nodes -A -o json"),
            "{msg}"
        );
        assert!(
            msg.contains("items[0].metadata") && msg.contains("missing field `name`"),
            "{msg}"
        );
        let Err(err) = ClusterSource::from_file(Path::new("/nonexistent/state.json")) else {
            panic!("must fail")
        };
        assert!(
            err.to_string()
                .starts_with("cannot read the cluster state file /nonexistent/state.json"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_unreadable_or_malformed_kubeconfig_is_a_clear_error() {
        let Err(err) =
            ClusterSource::from_kubeconfig(Path::new("/nonexistent/kubeconfig"), "node-a").await
        else {
            panic!("must fail")
        };
        assert!(
            err.to_string()
                .starts_with("cannot read the kubeconfig /nonexistent/kubeconfig"),
            "{err}"
        );
        let path = temp("kubeconfig-bad", "clusters: [this is not a kubeconfig");
        let Err(err) = ClusterSource::from_kubeconfig(&path, "node-a").await else {
            panic!("must fail")
        };
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("cannot read the kubeconfig {}: ", path.display())),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1, "one sentence: {text}");
        assert!(
            text.len() > format!("cannot read the kubeconfig {}: ", path.display()).len() + 10,
            "the parser's reason follows: {text}"
        );
    }
}
