//! Just enough HTTP/1.1 for the fixture: one request per connection (`Connection: close`), a JSON
//! body with `Content-Length`, or a chunked stream of watch lines.
use std::{
    io::{BufRead as _, BufReader, Write as _},
    net::TcpStream,
};

use serde_json::{Value, json};

/// One request: the path without its query, and the query's parameters, decoded.
pub struct Request {
    pub path: String,
    params: Vec<(String, String)>,
}

impl Request {
    /// Reads the request line and skips the headers; `None` when the client went away first.
    pub fn read(conn: &TcpStream) -> Option<Request> {
        let mut reader = BufReader::new(conn.try_clone().ok()?);
        let mut request_line = String::new();
        reader.read_line(&mut request_line).ok()?;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let target = request_line.split_whitespace().nth(1).unwrap_or("/");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let params = query
            .split('&')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (decode(k), decode(v))
            })
            .collect();
        Some(Request {
            path: path.to_string(),
            params,
        })
    }

    /// A query parameter, `""` when absent.
    pub fn param(&self, key: &str) -> &str {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// `application/x-www-form-urlencoded` decoding, as kube encodes queries (`%3D`, `+`).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// A `metav1.Status` failure as the API server writes it (k8s.io/apimachinery
/// `pkg/apis/meta/v1/types.go`, `Status`; reasons from `StatusReason`).
pub fn status(code: u16, message: &str) -> Value {
    let reason = match code {
        400 => "BadRequest",
        404 => "NotFound",
        410 => "Expired",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

/// A whole response with a JSON body.
pub fn respond(out: &mut TcpStream, code: u16, body: &str) {
    let _ = write!(
        out,
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason_phrase(code),
        body.len()
    );
    let _ = out.flush();
}

/// The head of a chunked `200` watch stream.
pub fn start_stream(out: &mut TcpStream) -> bool {
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .and_then(|()| out.flush())
    .is_ok()
}

/// One line of a watch stream, as one chunk. False when the client went away.
pub fn send_line(out: &mut TcpStream, line: &str) -> bool {
    let line = format!("{line}\n");
    write!(out, "{:x}\r\n{line}\r\n", line.len())
        .and_then(|()| out.flush())
        .is_ok()
}

/// The end of a chunked stream: the server closed the watch normally.
pub fn end_stream(out: &mut TcpStream) {
    let _ = write!(out, "0\r\n\r\n");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn decodes_form_encoding() {
        assert_eq!(decode("spec.nodeName%3Dnode-a"), "spec.nodeName=node-a");
        assert_eq!(decode("a+b"), "a b");
        assert_eq!(decode("100%"), "100%");
    }
}
