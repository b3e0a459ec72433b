//! HTTP/1.1 for the admin listener, as little of it as the console needs: one request per
//! connection, a bounded head, a `Content-Length` body up to `BODY_BYTES_MAX` (no chunked
//! bodies), a deadline for the whole read, and answers with `Connection: close`.
//! Parsing is pure (`parse_head`, `body_len`) and unit-tested; `read_request` feeds it.

use futures_lite::{AsyncRead, AsyncReadExt};
use std::borrow::Cow;
use std::time::Duration;

/// Longest request head read (request line and headers).
pub const HEAD_BYTES_MAX: usize = 16 * 1024;
/// Largest request body (a console action's JSON).
pub const BODY_BYTES_MAX: usize = 64 * 1024;
/// How long a client has to send its whole request.
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Most headers one request may carry.
const HEADERS_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded per segment by `segments`, without the query.
    pub path: String,
    pub query: Vec<(String, String)>,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    pub fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// The path's segments, percent-decoded (`/api/topics/a%2Fb` → ["api", "topics", "a/b"]).
    pub fn segments(&self) -> Vec<String> {
        self.path.split('/').filter(|s| !s.is_empty()).map(percent_decode).collect()
    }

    /// A cookie's value from the `Cookie` header.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        let cookies = self.header("cookie")?;
        cookies.split(';').find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then_some(value)
        })
    }
}

/// Why a request could not be read: the answer's status, or nothing (the client went away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    Closed,
    Status(&'static str, &'static str),
}

/// Reads one request within `REQUEST_READ_TIMEOUT`.
pub async fn read_request<R: AsyncRead + Unpin>(stream: &mut R) -> Result<Request, ReadError> {
    let reading = read_unbounded_in_time(stream);
    futures_lite::future::or(reading, async {
        shard::runtime::sleep(REQUEST_READ_TIMEOUT).await;
        Err(ReadError::Status("408 Request Timeout", "the request took too long to arrive"))
    })
    .await
}

async fn read_unbounded_in_time<R: AsyncRead + Unpin>(
    stream: &mut R,
) -> Result<Request, ReadError> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        // Not HTTP (a Kafka client sent to this port by mistake): answered at once.
        let line = data.split(|byte| *byte == b'\r').next().unwrap_or_default();
        if line.iter().any(|byte| !(0x20..0x7f).contains(byte)) {
            return Err(BAD);
        }
        if data.len() >= HEAD_BYTES_MAX {
            return Err(ReadError::Status("431 Request Header Fields Too Large", "head too long"));
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return Err(ReadError::Closed),
            Ok(read) => data.extend_from_slice(buffer.get(..read).unwrap_or_default()),
        }
    };
    let mut request = parse_head(data.get(..head_end).unwrap_or_default())?;
    let len = body_len(&request)?;
    let mut body = data.get(head_end..).unwrap_or_default().to_vec();
    while body.len() < len {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return Err(ReadError::Closed),
            Ok(read) => body.extend_from_slice(buffer.get(..read).unwrap_or_default()),
        }
    }
    body.truncate(len);
    request.body = body;
    Ok(request)
}

const BAD: ReadError = ReadError::Status("400 Bad Request", "malformed request");

/// Parses a request head (through its blank line).
pub fn parse_head(head: &[u8]) -> Result<Request, ReadError> {
    let text = std::str::from_utf8(head).map_err(|_| BAD)?;
    let mut lines = text.split("\r\n");
    let mut words = lines.next().ok_or(BAD)?.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(BAD);
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(BAD);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect();
    let mut headers = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':').ok_or(BAD)?;
        if name.is_empty() || name.contains(' ') {
            return Err(BAD);
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
        if headers.len() > HEADERS_MAX {
            return Err(ReadError::Status(
                "431 Request Header Fields Too Large",
                "too many headers",
            ));
        }
    }
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query,
        headers,
        body: Vec::new(),
    })
}

/// The body's length: `Content-Length` (one, at most `BODY_BYTES_MAX`), none without it;
/// chunked bodies are not taken.
pub fn body_len(request: &Request) -> Result<usize, ReadError> {
    if request.header("transfer-encoding").is_some() {
        return Err(ReadError::Status("501 Not Implemented", "chunked bodies are not taken"));
    }
    let lengths: Vec<&str> = request
        .headers
        .iter()
        .filter(|(name, _)| name == "content-length")
        .map(|(_, value)| value.as_str())
        .collect();
    match lengths.as_slice() {
        [] => Ok(0),
        [one] => {
            let len: usize = one.parse().map_err(|_| BAD)?;
            if len > BODY_BYTES_MAX {
                return Err(ReadError::Status("413 Content Too Large", "body too large"));
            }
            Ok(len)
        }
        _ => Err(BAD),
    }
}

/// `%XX` decoded (and `+` left as it is: the console's client encodes spaces as `%20`);
/// invalid escapes and non-UTF-8 results are kept as they were written.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes.get(index).copied().unwrap_or_default();
        let hex = bytes.get(index + 1..index + 3).and_then(|pair| {
            std::str::from_utf8(pair).ok().and_then(|pair| u8::from_str_radix(pair, 16).ok())
        });
        match (byte, hex) {
            (b'%', Some(value)) => {
                out.push(value);
                index += 3;
            }
            _ => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: &'static str,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Cow<'static, [u8]>,
}

/// The headers every console answer carries: no framing by other sites, no inline script,
/// no sniffing, no referrer.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    (
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
         frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
];

impl Response {
    pub fn json(status: &'static str, value: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: "application/json",
            headers: vec![("Cache-Control", "no-store".to_string())],
            body: Cow::Owned(value.to_string().into_bytes()),
        }
    }

    pub fn text(status: &'static str, text: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: Cow::Owned(text.as_bytes().to_vec()),
        }
    }

    /// The whole answer as it goes on the wire.
    pub fn to_bytes(&self, security_headers: bool) -> Vec<u8> {
        let mut head = format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            self.content_type,
            self.body.len()
        );
        let security = SECURITY_HEADERS.iter().filter(|_| security_headers);
        for (name, value) in security.map(|(n, v)| (*n, *v)) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Request, ReadError> {
        parse_head(text.as_bytes())
    }

    #[test]
    fn a_request_head_is_parsed_with_its_query_and_headers() {
        let request = head(
            "GET /api/topics/a%2Fb/partitions/0/messages?offset=5&limit=2 HTTP/1.1\r\n\
             Host: 127.0.0.1:9644\r\nCookie: x=1; strata_console=tok\r\n\r\n",
        )
        .expect("parsed");
        assert_eq!(request.method, "GET");
        assert_eq!(request.segments(), ["api", "topics", "a/b", "partitions", "0", "messages"]);
        assert_eq!(request.query("offset"), Some("5"));
        assert_eq!(request.query("limit"), Some("2"));
        assert_eq!(request.header("host"), Some("127.0.0.1:9644"));
        assert_eq!(request.cookie("strata_console"), Some("tok"));
        assert_eq!(request.cookie("missing"), None);
    }

    #[test]
    fn malformed_heads_and_bodies_are_refused_with_a_status() {
        assert_eq!(head("GET\r\n\r\n"), Err(BAD));
        assert_eq!(head("GET x HTTP/1.1\r\n\r\n"), Err(BAD));
        assert_eq!(head("GET / SMTP\r\n\r\n"), Err(BAD));
        assert_eq!(head("GET / HTTP/1.1\r\nno colon\r\n\r\n"), Err(BAD));
        let many: String = (0..100).map(|i| format!("h{i}: v\r\n")).collect();
        let too_many = head(&format!("GET / HTTP/1.1\r\n{many}\r\n"));
        assert!(matches!(too_many, Err(ReadError::Status(status, _)) if status.starts_with("431")));
        let two = head("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
        assert_eq!(body_len(&two.expect("parsed")), Err(BAD));
        let big = head("POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n").expect("parsed");
        assert!(matches!(body_len(&big), Err(ReadError::Status(s, _)) if s.starts_with("413")));
        let chunked =
            head("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").expect("parsed");
        assert!(matches!(body_len(&chunked), Err(ReadError::Status(s, _)) if s.starts_with("501")));
        assert_eq!(percent_decode("%zz%41%"), "%zzA%");
        assert_eq!(percent_decode("%ff"), "%ff", "not UTF-8: kept as written");
    }

    #[test]
    fn a_body_is_read_to_its_length_and_no_further() {
        let wire = b"POST /api/login HTTP/1.1\r\nContent-Length: 4\r\n\r\nbodyEXTRA".to_vec();
        let mut reader = futures_lite::io::Cursor::new(wire);
        let request =
            futures_lite::future::block_on(read_unbounded_in_time(&mut reader)).expect("read");
        assert_eq!(request.body, b"body");
        let mut short = futures_lite::io::Cursor::new(
            b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab".to_vec(),
        );
        let closed = futures_lite::future::block_on(read_unbounded_in_time(&mut short));
        assert_eq!(closed, Err(ReadError::Closed));
        let kafka = [0u8, 0, 0, 23, 0, 18, 0, 3, 0, 0, 0, 1];
        let mut binary = futures_lite::io::Cursor::new(kafka.to_vec());
        let refused = futures_lite::future::block_on(read_unbounded_in_time(&mut binary));
        assert_eq!(refused, Err(BAD), "a Kafka frame is answered at once, not after the deadline");
    }
}
