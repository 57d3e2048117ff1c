//! Why a request to the Kubernetes API failed, in words an operator can act on (the address and
//! the OS error when the API cannot be reached), and which failures are the same cause: the client
//! says a cause once, not once per retry.
use std::{error::Error as StdError, fmt};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No HTTP answer: the connection was refused, reset or timed out (the OS error).
    Unreachable {
        url: String,
        error: String,
    },
    /// An HTTP error status.
    Status {
        code: u16,
        message: String,
    },
    /// A watch stream carried a line that is not a watch event.
    BrokenStream(String),
    /// A watch stream carried an `ERROR` event other than 410.
    ErrorEvent {
        code: u16,
        message: String,
    },
    /// `410 Gone` (on the watch request or as an event): the resume point is too old, list again.
    Expired,
    /// The watch ended at once without a single event.
    ShortWatch,
    Other(String),
}

impl Failure {
    /// `url`: the API server's address, named when it cannot be reached.
    pub fn from_kube(error: &kube::Error, url: &str) -> Failure {
        match error {
            kube::Error::Api(status) if status.code == 410 => Failure::Expired,
            kube::Error::Api(status) => Failure::Status {
                code: status.code,
                message: status.message.clone(),
            },
            kube::Error::SerdeError(e) => {
                Failure::BrokenStream(format!("a line that is not a watch event ({e})"))
            }
            kube::Error::ReadEvents(e) => Failure::Unreachable {
                url: url.to_string(),
                error: format!("reading the watch stream: {e}"),
            },
            other => match os_error(other) {
                Some(io) => Failure::Unreachable {
                    url: url.to_string(),
                    error: io,
                },
                None => Failure::Other(chain(other)),
            },
        }
    }

    /// The same cause as `other`: the kind of failure and its code, not its message (which
    /// carries resource versions and the like).
    pub fn same_cause(&self, other: &Failure) -> bool {
        match (self, other) {
            (Failure::Status { code: a, .. }, Failure::Status { code: b, .. })
            | (Failure::ErrorEvent { code: a, .. }, Failure::ErrorEvent { code: b, .. }) => a == b,
            (Failure::Unreachable { error: a, .. }, Failure::Unreachable { error: b, .. }) => {
                a == b
            }
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable { url, error } => {
                write!(f, "cannot reach the API server at {url}: {error}")
            }
            Failure::Status { code, message } if message.is_empty() => {
                write!(f, "the API server answered HTTP {code}")
            }
            Failure::Status { code, message } => {
                write!(f, "the API server answered HTTP {code}: {message}")
            }
            Failure::BrokenStream(what) => write!(f, "the watch stream broke: {what}"),
            Failure::ErrorEvent { code, message } => {
                write!(f, "the watch stream sent an error {code}: {message}")
            }
            Failure::Expired => f.write_str(
                "410 Gone: the watch's resume point is older than the API server keeps, \
                 so everything is listed again",
            ),
            Failure::ShortWatch => f.write_str("the watch ended at once without an event"),
            Failure::Other(text) => f.write_str(text),
        }
    }
}

/// The OS error under a connection failure (`Connection refused (os error 111)`), if there is one.
fn os_error(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut next: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io.to_string());
        }
        next = e.source();
    }
    None
}

/// An error and its sources, each said once (wrappers often repeat their source's text).
fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_cause_ignores_the_message() {
        let a = Failure::Status {
            code: 500,
            message: "etcd leader changed".into(),
        };
        let b = Failure::Status {
            code: 500,
            message: "timeout".into(),
        };
        let c = Failure::Status {
            code: 503,
            message: String::new(),
        };
        assert!(a.same_cause(&b));
        assert!(!a.same_cause(&c));
        assert!(Failure::Expired.same_cause(&Failure::Expired));
        assert!(!Failure::Expired.same_cause(&Failure::ShortWatch));
    }

    #[test]
    fn an_unreachable_api_is_named_with_its_os_error() {
        let io = std::io::Error::from_raw_os_error(111);
        let e = kube::Error::Service(Box::new(io));
        let f = Failure::from_kube(&e, "https://10.96.0.1:443");
        assert_eq!(
            f.to_string(),
            "cannot reach the API server at https://10.96.0.1:443: Connection refused (os error 111)"
        );
    }
}
