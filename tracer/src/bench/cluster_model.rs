//! `tracer bench-cluster-model` (hidden, used by `cargo xtask bench`): what the cluster model costs
//! for a large cluster. `--write FILE --pods N` writes a generated kubectl snapshot (N pods on N/100
//! nodes, a Service and an EndpointSlice per 10 pods); `--load FILE` reads it as `--cluster-state`
//! does, and `--load-items FILE` builds the model the way the live watch does (object by object).
//! Each prints one JSON line: load seconds, peak and final resident memory. Separate processes, so
//! one measurement's memory is not in another's peak.
use std::{fmt::Write as _, path::PathBuf, time::Instant};

use anyhow::Context as _;

use super::rss_kib;
use crate::identity::cluster::{ClusterState, parse_item};

#[derive(Debug, clap::Args)]
pub struct BenchClusterModelArgs {
    /// Write a generated snapshot here.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["load", "load_items"])]
    pub write: Option<PathBuf>,
    /// Pods in the generated snapshot.
    #[arg(long, default_value_t = 70_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub pods: u32,
    /// Load this snapshot as `--cluster-state` does.
    #[arg(long, value_name = "FILE")]
    pub load: Option<PathBuf>,
    /// Build the model object by object, as the live watch does.
    #[arg(long, value_name = "FILE")]
    pub load_items: Option<PathBuf>,
}

pub fn run(args: &BenchClusterModelArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.write {
        let text = snapshot(args.pods);
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
        println!("{{\"file_bytes\":{},\"pods\":{}}}", text.len(), args.pods);
        return Ok(());
    }
    let (path, by_items) = match (&args.load, &args.load_items) {
        (Some(path), None) => (path, false),
        (None, Some(path)) => (path, true),
        _ => anyhow::bail!("give one of --write, --load or --load-items"),
    };
    let started = Instant::now();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let state = if by_items {
        // One object at a time, as the watch hands them over.
        #[derive(serde::Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<&'a serde_json::value::RawValue>,
        }
        let list: List<'_> = serde_json::from_str(&text)?;
        let mut parsed = Vec::with_capacity(list.items.len());
        for raw in list.items {
            let item: serde_json::Value = serde_json::from_str(raw.get())?;
            parsed.extend(parse_item(&item, "")?);
        }
        ClusterState::from_items(parsed)
    } else {
        ClusterState::from_kubectl_json(&text)?
    };
    drop(text);
    let load_s = started.elapsed().as_secs_f64();
    let (peak, now) = rss_kib();
    println!(
        "{{\"pods\":{},\"load_s\":{load_s:.3},\"peak_rss_kib\":{peak},\"rss_kib\":{now}}}",
        state.pods().len()
    );
    Ok(())
}

/// A kubectl List with `pods` pods shaped like a real cluster's: labels, an owner, a container port,
/// a node; Services with selectors, EndpointSlices listing their pods, nodes with addresses.
fn snapshot(pods: u32) -> String {
    let nodes = (pods / 100).max(1);
    let services = (pods / 10).max(1);
    let mut out = String::with_capacity(pods as usize * 800);
    out.push_str(r#"{"apiVersion":"v1","kind":"List","items":["#);
    let ip = |i: u32| format!("10.{}.{}.{}", 64 + (i >> 16) % 64, (i >> 8) & 255, i & 255);
    for n in 0..nodes {
        let _ = write!(
            out,
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"node-{n}","labels":{{"kubernetes.io/hostname":"node-{n}","topology.kubernetes.io/zone":"zone-{z}"}}}},"spec":{{"podCIDR":"10.{a}.{b}.0/24","podCIDRs":["10.{a}.{b}.0/24"]}},"status":{{"addresses":[{{"type":"InternalIP","address":"192.168.{a}.{b}"}},{{"type":"Hostname","address":"node-{n}"}}]}}}},"#,
            z = n % 3,
            a = n / 256,
            b = n % 256
        );
    }
    for p in 0..pods {
        let app = p / 10;
        let _ = write!(
            out,
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"app-{app}-{p:08x}","namespace":"ns-{ns}","uid":"{p:08x}-1111-2222-3333-444455556666","labels":{{"app":"app-{app}","pod-template-hash":"{h:08x}","team":"team-{t}","version":"v1"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-{app}-{h:08x}","uid":"{h:08x}-aaaa","controller":true}}]}},"spec":{{"nodeName":"node-{node}","containers":[{{"name":"main","image":"registry.example/app:1.2.3","ports":[{{"name":"http","containerPort":8080,"protocol":"TCP"}}]}}]}},"status":{{"phase":"Running","podIP":"{pip}","podIPs":[{{"ip":"{pip}"}}],"conditions":[{{"type":"Ready","status":"True"}}]}}}},"#,
            ns = app % 50,
            h = app,
            t = app % 20,
            node = p % nodes,
            pip = ip(p)
        );
    }
    for s in 0..services {
        let _ = write!(
            out,
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"app-{s}","namespace":"ns-{ns}"}},"spec":{{"type":"ClusterIP","clusterIP":"10.96.{a}.{b}","clusterIPs":["10.96.{a}.{b}"],"selector":{{"app":"app-{s}"}},"ports":[{{"name":"http","port":80,"targetPort":"http","protocol":"TCP"}}]}}}},"#,
            ns = s % 50,
            a = s / 256,
            b = s % 256
        );
        let endpoints: Vec<String> = (0..10)
            .map(|k| s * 10 + k)
            .filter(|&p| p < pods)
            .map(|p| {
                format!(
                    r#"{{"addresses":["{}"],"conditions":{{"ready":true,"serving":true,"terminating":false}},"nodeName":"node-{}","targetRef":{{"kind":"Pod","name":"app-{s}-{p:08x}","namespace":"ns-{}","uid":"{p:08x}-1111-2222-3333-444455556666"}}}}"#,
                    ip(p),
                    p % nodes,
                    s % 50
                )
            })
            .collect();
        let _ = write!(
            out,
            r#"{{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{{"name":"app-{s}-abcde","namespace":"ns-{ns}","labels":{{"kubernetes.io/service-name":"app-{s}"}}}},"addressType":"IPv4","ports":[{{"name":"http","port":8080,"protocol":"TCP"}}],"endpoints":[{}]}},"#,
            endpoints.join(","),
            ns = s % 50
        );
    }
    out.pop(); // the last comma
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_snapshot_loads_with_every_pod_service_and_node() {
        let state = ClusterState::from_kubectl_json(&snapshot(250)).expect("valid snapshot");
        assert_eq!(state.pods().len(), 250);
        assert_eq!(state.services().len(), 25);
        assert_eq!(state.endpoint_slices().len(), 25);
        assert_eq!(state.nodes().len(), 2);
    }
}
