//! `deploy/` checked offline against the Kubernetes API types (k8s-openapi, the API version the
//! tracer's watch uses): every document deserializes into its kind's type with no field left over,
//! so a typo in a manifest fails here rather than at `kubectl apply`. Then what the `DaemonSet` must
//! say for the tracer to work on a node.
use std::path::{Path, PathBuf};

use k8s_openapi::{
    Resource,
    api::{
        apps::v1::DaemonSet,
        core::v1::{Namespace, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
};
use serde::de::DeserializeOwned;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Deserializes `doc` as `T`; an unknown field (a typo) or a wrong `apiVersion` is an error.
fn typed<T: DeserializeOwned + Resource>(doc: serde_yaml_ng::Value) -> Result<T, String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default().to_string();
    if api_version != T::API_VERSION {
        return Err(format!(
            "apiVersion {api_version:?}, expected {:?} for {}",
            T::API_VERSION,
            T::KIND
        ));
    }
    let mut unknown = Vec::new();
    // serde_ignored marks each Option it passes through with `?`: not part of the field path.
    let value: T =
        serde_ignored::deserialize(doc, |path| unknown.push(path.to_string().replace(".?", "")))
            .map_err(|e| e.to_string())?;
    if unknown.is_empty() {
        Ok(value)
    } else {
        Err(format!("unknown fields: {}", unknown.join(", ")))
    }
}

/// Every document of every manifest, checked; returns the `DaemonSet`.
fn check_all() -> Result<DaemonSet, String> {
    let mut daemonset = None;
    for file in manifest_files() {
        let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let doc = serde_yaml_ng::Value::deserialize(doc)
                .map_err(|e| format!("{}: {e}", file.display()))?;
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let checked = match kind.as_str() {
                "Namespace" => typed::<Namespace>(doc).map(drop),
                "ServiceAccount" => typed::<ServiceAccount>(doc).map(drop),
                "ClusterRole" => typed::<ClusterRole>(doc).map(drop),
                "ClusterRoleBinding" => typed::<ClusterRoleBinding>(doc).map(drop),
                "DaemonSet" => typed::<DaemonSet>(doc).map(|d| daemonset = Some(d)),
                other => Err(format!("kind {other:?} is not expected in deploy/")),
            };
            checked.map_err(|e| format!("{} ({kind}): {e}", file.display()))?;
        }
    }
    daemonset.ok_or_else(|| "no DaemonSet in deploy/".into())
}

use serde::Deserialize as _;

fn manifest_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .expect("deploy/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_manifest_is_a_valid_kubernetes_object_with_no_unknown_field() {
    if let Err(e) = check_all() {
        panic!("{e}");
    }
}

#[test]
fn a_typo_in_a_field_name_is_caught() {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: t}\nspec:\n  selector: {}\n  \
         template:\n    spec:\n      hostNetwrok: true\n      containers: []\n",
    )
    .expect("YAML");
    let err = typed::<DaemonSet>(doc).expect_err("a typo");
    assert!(err.contains("spec.template.spec.hostNetwrok"), "{err}");
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str("apiVersion: extensions/v1beta1\nkind: DaemonSet\n").expect("YAML");
    assert!(
        typed::<DaemonSet>(doc)
            .expect_err("old API")
            .contains("apiVersion")
    );
}

#[test]
fn kustomization_lists_every_manifest_and_names_the_daemonsets_image() {
    let text = std::fs::read_to_string(deploy_dir().join("kustomization.yaml")).expect("file");
    let k: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("YAML");
    let mut listed: Vec<String> = k["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a file").to_string())
        .collect();
    listed.sort();
    let files: Vec<String> = manifest_files()
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, files);
    let ds = check_all().expect("valid manifests");
    let pod = ds.spec.template.spec.expect("pod spec");
    assert_eq!(
        k["images"][0]["name"].as_str(),
        pod.containers[0].image.as_deref(),
        "kustomize's image override applies to the DaemonSet"
    );
}

#[test]
fn the_daemonset_runs_on_every_node_with_host_namespaces_and_least_privilege() {
    let ds = check_all().expect("valid manifests");
    let pod = ds.spec.template.spec.clone().expect("pod spec");
    assert_eq!(
        pod.host_network,
        Some(true),
        "the node's conntrack and routes"
    );
    assert_eq!(
        pod.host_pid,
        Some(true),
        "the node's processes and their namespaces"
    );
    let tolerations = pod.tolerations.expect("tolerations");
    assert!(
        tolerations
            .iter()
            .any(|t| t.operator.as_deref() == Some("Exists")
                && t.key.is_none()
                && t.effect.is_none()),
        "tolerates every taint: {tolerations:?}"
    );
    let c = &pod.containers[0];
    let args = c.args.clone().expect("args");
    for wanted in ["trace", "--in-cluster", "--format=json"] {
        assert!(args.iter().any(|a| a == wanted), "{wanted} in {args:?}");
    }
    // Scraped on every node (`--metrics`, #16): the port in the args, the container port and the
    // scrape annotations agree.
    let metrics_arg = args
        .iter()
        .find_map(|a| a.strip_prefix("--metrics="))
        .expect("--metrics in the args");
    let port: i32 = metrics_arg
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("--metrics=...:PORT");
    let ports = c.ports.clone().expect("ports");
    assert!(
        ports
            .iter()
            .any(|p| p.container_port == port && p.name.as_deref() == Some("metrics")),
        "{ports:?}"
    );
    let annotations = ds
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .expect("pod annotations");
    assert_eq!(
        annotations.get("prometheus.io/scrape").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        annotations.get("prometheus.io/port"),
        Some(&port.to_string())
    );
    let env = c.env.clone().expect("env");
    let node = env
        .iter()
        .find(|e| e.name == "NODE_NAME")
        .expect("NODE_NAME");
    assert_eq!(
        node.value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str()),
        Some("spec.nodeName"),
        "the node name from the downward API"
    );
    let security = c.security_context.clone().expect("securityContext");
    assert_eq!(security.privileged, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    let caps = security.capabilities.expect("capabilities");
    assert_eq!(caps.drop, Some(vec!["ALL".to_string()]));
    assert!(
        c.resources
            .as_ref()
            .is_some_and(|r| r.requests.is_some() && r.limits.is_some())
    );
    for mount in c.volume_mounts.as_deref().unwrap_or_default() {
        assert_eq!(
            mount.read_only,
            Some(true),
            "read-only mount {}",
            mount.name
        );
    }
}

/// `deploy/grafana-dashboard.json`: Grafana's dashboard model with one `PromQL` query at least per
/// panel, every query on the dashboard's one Prometheus variable. (That each query returns series
/// is checked against a real Prometheus by `tests/tests/cluster_live.rs`.)
#[test]
fn the_grafana_dashboard_has_a_prometheus_query_per_panel() {
    let text = std::fs::read_to_string(deploy_dir().join("grafana-dashboard.json")).expect("file");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(dashboard["uid"], "tracer-cluster");
    assert_eq!(
        dashboard["templating"]["list"][0]["name"], "datasource",
        "the Prometheus is chosen at import"
    );
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids: Vec<u64> = panels.iter().filter_map(|p| p["id"].as_u64()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), panels.len(), "one id per panel");
    for panel in panels {
        let title = panel["title"].as_str().expect("a title");
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            assert!(expr.contains("tracer_"), "{title}: {expr}");
            assert!(t["refId"].is_string(), "{title}");
        }
    }
}
