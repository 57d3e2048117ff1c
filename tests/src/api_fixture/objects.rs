//! What the fixture serves: the four kinds the tracer follows, their URL paths, and the objects of
//! each (a kubectl snapshot, or a generated large cluster) with the changes made since, each change a
//! new `resourceVersion` and an event for the watches.
use std::collections::{BTreeMap, HashSet, VecDeque};

use serde_json::{Value, json};

use super::{
    selectors::{FieldSelector, LabelSelector},
    synthetic::Synthetic,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Pod,
    Service,
    EndpointSlice,
    Node,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Pod, Kind::Service, Kind::EndpointSlice, Kind::Node];

    /// The resource name in URLs: `pods`.
    #[must_use]
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::Service => "services",
            Kind::EndpointSlice => "endpointslices",
            Kind::Node => "nodes",
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Node => "Node",
        }
    }

    #[must_use]
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::EndpointSlice => "discovery.k8s.io/v1",
            _ => "v1",
        }
    }

    fn group_prefix(self) -> &'static str {
        match self {
            Kind::EndpointSlice => "/apis/discovery.k8s.io/v1",
            _ => "/api/v1",
        }
    }

    #[must_use]
    pub fn namespaced(self) -> bool {
        self != Kind::Node
    }

    /// The cluster-wide collection: `/api/v1/pods`.
    #[must_use]
    pub fn collection(self) -> String {
        format!("{}/{}", self.group_prefix(), self.resource())
    }

    fn from_name(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == kind)
    }
}

/// What a URL path names: a collection (cluster-wide or in a namespace) or one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Route {
    /// `/api/v1/pods`, `/api/v1/namespaces/NS/pods[/NAME]`, `/api/v1/nodes[/NAME]`,
    /// `/apis/discovery.k8s.io/v1/[namespaces/NS/]endpointslices[/NAME]`.
    #[must_use]
    pub fn parse(path: &str) -> Option<Route> {
        let rest = path
            .strip_prefix("/api/v1/")
            .map(|r| (r, false))
            .or_else(|| {
                path.strip_prefix("/apis/discovery.k8s.io/v1/")
                    .map(|r| (r, true))
            });
        let (rest, discovery) = rest?;
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        let (namespace, resource, name) = match parts.as_slice() {
            ["namespaces", ns, resource] => (Some(*ns), *resource, None),
            ["namespaces", ns, resource, name] => (Some(*ns), *resource, Some(*name)),
            [resource] => (None, *resource, None),
            [resource, name] => (None, *resource, Some(*name)),
            _ => return None,
        };
        let kind = Kind::ALL.into_iter().find(|k| k.resource() == resource)?;
        if (kind == Kind::EndpointSlice) != discovery
            || (!kind.namespaced() && namespace.is_some())
            || (kind.namespaced() && name.is_some() && namespace.is_none())
        {
            return None;
        }
        Some(Route {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
        })
    }
}

/// One event of the watch log, in the order changes were made.
pub struct Event {
    pub rv: u64,
    pub kind: Kind,
    /// The object after the change (for `DELETED`, as it was), with `kind` and `apiVersion`.
    pub object: Value,
    /// The whole watch line.
    pub line: String,
}

/// Events kept for watches; a watch from before the oldest kept is told `410 Gone` (the API
/// server's compaction).
const EVENTS_KEPT: usize = 20_000;

/// Where the objects come from before any change.
enum Base {
    Snapshot(BTreeMap<Kind, Vec<Value>>),
    Synthetic(Synthetic),
}

pub struct Store {
    base: Base,
    /// Keys of the snapshot's objects, for telling a change of one from a new object.
    snapshot_keys: HashSet<(Kind, String, String)>,
    /// Changed objects by kind, namespace and name: `None` deleted. New objects list after the
    /// base ones, in key order.
    changed: BTreeMap<(Kind, String, String), Option<Value>>,
    pub rv: u64,
    pub events: VecDeque<Event>,
    /// Watches from a `resourceVersion` at or below this are too old.
    pub compacted_rv: u64,
}

/// A page of a list, and where the next page starts.
pub struct Page {
    pub items: Vec<Value>,
    pub next: Option<usize>,
}

fn key_of(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    (
        meta["namespace"].as_str().unwrap_or("").to_string(),
        meta["name"].as_str().unwrap_or("").to_string(),
    )
}

impl Store {
    /// The items of a kubectl `List`, by their `kind`; the `resourceVersion` starts at 1.
    #[must_use]
    pub fn snapshot(list: &Value) -> Store {
        let mut by_kind: BTreeMap<Kind, Vec<Value>> = BTreeMap::new();
        let mut snapshot_keys = HashSet::new();
        for item in list["items"].as_array().into_iter().flatten() {
            if let Some(kind) = item["kind"].as_str().and_then(Kind::from_name) {
                let (ns, name) = key_of(item);
                snapshot_keys.insert((kind, ns, name));
                by_kind.entry(kind).or_default().push(item.clone());
            }
        }
        Store::new(Base::Snapshot(by_kind), snapshot_keys)
    }

    #[must_use]
    pub fn synthetic(cluster: Synthetic) -> Store {
        Store::new(Base::Synthetic(cluster), HashSet::new())
    }

    fn new(base: Base, snapshot_keys: HashSet<(Kind, String, String)>) -> Store {
        Store {
            base,
            snapshot_keys,
            changed: BTreeMap::new(),
            rv: 1,
            events: VecDeque::new(),
            compacted_rv: 0,
        }
    }

    fn base_len(&self, kind: Kind) -> usize {
        match &self.base {
            Base::Snapshot(m) => m.get(&kind).map_or(0, Vec::len),
            Base::Synthetic(c) => c.count(kind),
        }
    }

    fn base_object(&self, kind: Kind, index: usize) -> Value {
        match &self.base {
            Base::Snapshot(m) => m[&kind][index].clone(),
            Base::Synthetic(c) => c.object(kind, index),
        }
    }

    fn in_base(&self, kind: Kind, ns: &str, name: &str) -> bool {
        match &self.base {
            Base::Snapshot(_) => {
                self.snapshot_keys
                    .contains(&(kind, ns.to_string(), name.to_string()))
            }
            Base::Synthetic(c) => c.index_of(kind, ns, name).is_some(),
        }
    }

    /// Object `index` of `kind` as it is now: the base one or its change; `None` if deleted.
    fn base_now(&self, kind: Kind, index: usize) -> Option<Value> {
        let object = self.base_object(kind, index);
        let (ns, name) = key_of(&object);
        match self.changed.get(&(kind, ns, name)) {
            Some(change) => change.clone(),
            None => Some(object),
        }
    }

    /// New objects (not in the base) of `kind`, in key order.
    fn added(&self, kind: Kind) -> Vec<&Value> {
        self.changed
            .range((kind, String::new(), String::new())..)
            .take_while(|((k, _, _), _)| *k == kind)
            .filter(|((k, ns, name), _)| !self.in_base(*k, ns, name))
            .filter_map(|(_, v)| v.as_ref())
            .collect()
    }

    /// One object by namespace and name.
    #[must_use]
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        if let Some(change) = self
            .changed
            .get(&(kind, namespace.to_string(), name.to_string()))
        {
            return change.clone();
        }
        match &self.base {
            Base::Snapshot(m) => m.get(&kind).and_then(|items| {
                items
                    .iter()
                    .find(|o| key_of(o) == (namespace.to_string(), name.to_string()))
                    .cloned()
            }),
            Base::Synthetic(c) => c.index_of(kind, namespace, name).map(|i| c.object(kind, i)),
        }
    }

    /// A page of `kind` from position `start` (base objects, then new ones), at most `limit`
    /// (0: all) matching the namespace and selectors.
    #[must_use]
    pub fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        fields: &FieldSelector,
        labels: &LabelSelector,
        start: usize,
        limit: usize,
    ) -> Page {
        let matches = |o: &Value| {
            namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
                && fields.matches(o)
                && labels.matches(o)
        };
        let limit = if limit == 0 { usize::MAX } else { limit };
        let base_len = self.base_len(kind);
        let mut items = Vec::new();
        // A large generated cluster answers selective lists from its layout, as the API server
        // answers them from its indexes.
        let candidates = match &self.base {
            Base::Synthetic(c) => c.candidates(kind, namespace, fields, labels),
            Base::Snapshot(_) => None,
        };
        let positions: Box<dyn Iterator<Item = usize>> = match candidates {
            Some(found) => Box::new(found.into_iter().filter(move |&i| i >= start)),
            None => Box::new(start..base_len),
        };
        for position in positions {
            if items.len() == limit {
                return Page {
                    items,
                    next: Some(position),
                };
            }
            if let Some(object) = self.base_now(kind, position)
                && matches(&object)
            {
                items.push(object);
            }
        }
        let added = self.added(kind);
        for (k, object) in added.into_iter().enumerate() {
            let position = base_len + k;
            if position < start || !matches(object) {
                continue;
            }
            if items.len() == limit {
                return Page {
                    items,
                    next: Some(position),
                };
            }
            items.push(object.clone());
        }
        Page { items, next: None }
    }

    /// Adds or replaces an object (by its kind, namespace and name), or deletes one: a new
    /// `resourceVersion` and a watch event.
    pub fn change(&mut self, kind: Kind, object: Value, delete: bool) {
        self.rv += 1;
        let (ns, name) = key_of(&object);
        let existed = self.get(kind, &ns, &name).is_some();
        let mut object = object;
        if let Some(map) = object.as_object_mut() {
            map.insert("kind".into(), kind.name().into());
            map.insert("apiVersion".into(), kind.api_version().into());
        }
        object["metadata"]["resourceVersion"] = self.rv.to_string().into();
        let kind_of_event = match (delete, existed) {
            (true, _) => "DELETED",
            (false, true) => "MODIFIED",
            (false, false) => "ADDED",
        };
        self.changed
            .insert((kind, ns, name), (!delete).then(|| object.clone()));
        let line = json!({"type": kind_of_event, "object": object}).to_string();
        self.events.push_back(Event {
            rv: self.rv,
            kind,
            object,
            line,
        });
        while self.events.len() > EVENTS_KEPT {
            if let Some(old) = self.events.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
    }

    /// Forgets every event: a watch from any earlier `resourceVersion` is told `410 Gone`.
    pub fn compact(&mut self) {
        self.events.clear();
        self.compacted_rv = self.rv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_of_the_four_kinds() {
        let r = Route::parse("/api/v1/namespaces/app/pods/web-1").expect("route");
        assert_eq!(
            (r.kind, r.namespace.as_deref(), r.name.as_deref()),
            (Kind::Pod, Some("app"), Some("web-1"))
        );
        assert_eq!(
            Route::parse("/apis/discovery.k8s.io/v1/endpointslices").map(|r| r.kind),
            Some(Kind::EndpointSlice)
        );
        assert_eq!(
            Route::parse("/api/v1/nodes/n1").map(|r| r.kind),
            Some(Kind::Node)
        );
        assert!(
            Route::parse("/api/v1/pods/web-1").is_none(),
            "a pod needs its namespace"
        );
        assert!(Route::parse("/api/v1/endpointslices").is_none());
        assert!(Route::parse("/api/v1/configmaps").is_none());
    }

    #[test]
    fn pages_and_changes() {
        let mut store = Store::synthetic(Synthetic::new(10, 3));
        let none = (FieldSelector::default(), LabelSelector::default());
        let first = store.list(Kind::Pod, None, &none.0, &none.1, 0, 20);
        assert_eq!(first.items.len(), 20);
        let rest = store.list(
            Kind::Pod,
            None,
            &none.0,
            &none.1,
            first.next.expect("more"),
            20,
        );
        assert_eq!(rest.items.len(), 10);
        assert!(rest.next.is_none());
        let on_node = FieldSelector::parse("spec.nodeName=node-4", Kind::Pod).expect("valid");
        let page = store.list(Kind::Pod, None, &on_node, &none.1, 0, 0);
        assert_eq!(page.items.len(), 3);
        let victim = page.items[0].clone();
        store.change(Kind::Pod, victim.clone(), true);
        assert_eq!(
            store
                .list(Kind::Pod, None, &on_node, &none.1, 0, 0)
                .items
                .len(),
            2
        );
        let mut new_pod = victim;
        new_pod["metadata"]["name"] = "extra".into();
        store.change(Kind::Pod, new_pod, false);
        assert_eq!(
            store
                .list(Kind::Pod, None, &on_node, &none.1, 0, 0)
                .items
                .len(),
            3
        );
        assert_eq!(store.events.len(), 2);
    }
}
