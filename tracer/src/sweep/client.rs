//! Prometheus's HTTP API, instant queries only: `GET /api/v1/query?query=...`, the JSON answer parsed
//! at the edge into `Sample`s. Plain HTTP/1.1 on hyper (a Prometheus reached in-cluster, through
//! `kubectl port-forward` or a proxy that ends TLS).
use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use serde::Deserialize;

/// How long one query may take, connect included.
const TIMEOUT: Duration = Duration::from_secs(20);

/// One series of an instant vector: its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// The label's value, empty when absent (as Prometheus treats it).
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// `--prometheus URL`: where the API is, checked before anything is asked.
#[derive(Debug, Clone)]
pub struct Prometheus {
    /// `host:port`, for the connection and the Host header.
    authority: String,
    /// The path prefix before `/api/v1` (a Prometheus behind `--web.route-prefix`), no trailing `/`.
    prefix: String,
    url: String,
}

impl Prometheus {
    pub fn new(url: &str) -> anyhow::Result<Prometheus> {
        let uri: Uri = url
            .parse()
            .map_err(|_| anyhow!("'{url}' is not a URL (like http://prometheus:9090)"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => bail!(
                "'{url}' is https: give the plain HTTP address (in-cluster, or through `kubectl \
                 port-forward`)"
            ),
            _ => bail!("'{url}' is not an http:// URL (like http://prometheus:9090)"),
        }
        let authority = uri
            .authority()
            .ok_or_else(|| anyhow!("'{url}' names no host"))?;
        let authority = if authority.port().is_some() {
            authority.to_string()
        } else {
            format!("{}:80", authority.host())
        };
        Ok(Prometheus {
            authority,
            prefix: uri.path().trim_end_matches('/').to_string(),
            url: url.to_string(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// An instant query's vector.
    pub async fn query(&self, promql: &str) -> anyhow::Result<Vec<Sample>> {
        let path = format!("{}/api/v1/query?query={}", self.prefix, encode(promql));
        let (status, body) = tokio::time::timeout(TIMEOUT, self.get(&path))
            .await
            .map_err(|_| {
                anyhow!(
                    "Prometheus at {} did not answer within {TIMEOUT:?}",
                    self.url
                )
            })??;
        parse_answer(status, &body).with_context(|| format!("query `{promql}` failed"))
    }

    async fn get(&self, path: &str) -> anyhow::Result<(u16, Bytes)> {
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("cannot reach Prometheus at {}", self.url))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .with_context(|| format!("cannot talk HTTP to {}", self.url))?;
        tokio::spawn(connection);
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .context("building the request")?;
        let response = sender
            .send_request(request)
            .await
            .with_context(|| format!("Prometheus at {} closed the connection", self.url))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .with_context(|| format!("reading the answer of {}", self.url))?
            .to_bytes();
        Ok((status, body))
    }
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    result: Vec<RawSample>,
}

#[derive(Deserialize)]
struct RawSample {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// The API's JSON into samples; a non-vector answer, an error status or bad JSON is an error.
pub fn parse_answer(status: u16, body: &[u8]) -> anyhow::Result<Vec<Sample>> {
    let answer: Answer = serde_json::from_slice(body).map_err(|_| {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        anyhow!(
            "HTTP {status} and not Prometheus's API JSON: {}",
            text.trim()
        )
    })?;
    if answer.status != "success" {
        bail!(
            "Prometheus says: {}",
            answer.error.unwrap_or_else(|| format!("HTTP {status}"))
        );
    }
    let data = answer
        .data
        .ok_or_else(|| anyhow!("Prometheus answered success without data"))?;
    if data.result_type != "vector" {
        bail!("expected an instant vector, got a {}", data.result_type);
    }
    data.result
        .into_iter()
        .map(|s| {
            let value = s
                .value
                .1
                .parse::<f64>()
                .map_err(|_| anyhow!("sample value '{}' is not a number", s.value.1))?;
            Ok(Sample {
                labels: s.metric,
                value,
            })
        })
        .collect()
}

/// Percent-encoding of a query parameter: unreserved characters as they are, every other byte
/// `%XX`.
fn encode(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_into_samples_and_errors_into_a_sentence() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"node":"node-3","service":"10.96.0.10:80"},"value":[1700000000.1,"12"]}]}}"#;
        let samples = parse_answer(200, body).expect("parses");
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].label("node"), "node-3");
        assert_eq!(samples[0].label("absent"), "");
        assert!((samples[0].value - 12.0).abs() < f64::EPSILON);
        let e = parse_answer(
            400,
            br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#,
        )
        .expect_err("an error");
        assert_eq!(e.to_string(), "Prometheus says: parse error at char 3");
        let e = parse_answer(502, b"<html>Bad Gateway</html>").expect_err("not JSON");
        assert!(e.to_string().starts_with("HTTP 502 and not"), "{e}");
    }

    #[test]
    fn urls_are_checked_and_queries_encoded() {
        assert!(Prometheus::new("https://p:9090").is_err());
        assert!(Prometheus::new("p:9090").is_err());
        let p = Prometheus::new("http://prom.example/prometheus/").expect("url");
        assert_eq!(p.authority, "prom.example:80");
        assert_eq!(p.prefix, "/prometheus");
        assert_eq!(encode("a{b=\"c d\"}[5m]"), "a%7Bb%3D%22c%20d%22%7D%5B5m%5D");
    }
}
