//! A point-in-time model of cluster state, indexed by address.
//!
//! The flow tracer sees only IPs and ports. To say what a destination *is*
//! (a pod, a Service VIP, a node, or an address some EndpointSlice still
//! points at although no pod has it any more) it needs pods, Services,
//! EndpointSlices and Nodes. This module loads them from the output of
//! `kubectl get pods,services,endpointslices,nodes -A -o json` (a `v1/List`
//! of mixed kinds), keeps only the fields the tracer needs, and answers
//! address questions.
//!
//! Each item is deserialized into its k8s-openapi type (as the live watch in
//! `watch.rs` receives them) and converted once into the small lookup model.
//! Unknown fields and unknown kinds are ignored. Errors carry the JSON
//! path of the offending value (via `serde_path_to_error`, or the conversion's
//! own path for a value the API types hold but the model cannot, such as a
//! port out of range) and the kind/name of the item it sits in.
//!
//! - `model.rs`: the objects kept (pods, Services, EndpointSlices, nodes), as the tracer needs them.
//! - `state.rs`: `ClusterState`, the indexed snapshot, and the address questions it answers.
//! - `parse.rs`: reading kubectl's JSON (a `List` or one object) into the model.
//! - `convert.rs`: the conversions from the k8s-openapi types to the model.

mod convert;
mod model;
mod parse;
mod state;

pub use convert::ModelError;
pub use model::{
    Addresses, ContainerPort, Endpoint, EndpointPort, EndpointSlice, Item, Node, OwnerRef, Pod,
    PodPhase, Proto, Service, ServicePort, TargetPort, TargetRef, intern,
};
pub use parse::{ClusterError, parse_item};
pub use state::{AddressIdentity, ClusterState, EndpointRef, SelectorTerm};
