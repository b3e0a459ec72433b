//! The console's pages: the files under `broker/console/` (hand-written ES modules, styles,
//! and the libraries `scripts/console_vendor.sh` copies from pinned npm packages), embedded in
//! the binary so that `cargo run` needs nothing else. Served at `/` (index.html) and
//! `/console/<path>`, with an ETag so the browser revalidates instead of downloading again.
//! A test checks that every file in the directory is in `ASSETS` and nothing else is.

use super::http::{Request, Response};
use super::{ConsoleError, Route};
use std::borrow::Cow;

macro_rules! assets {
    ($( $path:literal ),* $(,)?) => {
        /// (path under `broker/console/`, bytes).
        pub const ASSETS: &[(&str, &[u8])] = &[
            $( ($path, include_bytes!(concat!("../../console/", $path))), )*
        ];
    };
}

assets![
    "index.html",
    "app.css",
    "app.js",
    "api.js",
    "pages/charts.js",
    "pages/cluster.js",
    "pages/group.js",
    "pages/groups.js",
    "pages/login.js",
    "pages/messages.js",
    "pages/parts.js",
    "pages/topic.js",
    "pages/topics.js",
    "pages/transactions.js",
    "ui/action.js",
    "ui/bytes.js",
    "ui/chart.js",
    "ui/confirm.js",
    "ui/format.js",
    "ui/html.js",
    "ui/ready.js",
    "ui/table.js",
    "ui/use_api.js",
    "vendor/hooks.module.js",
    "vendor/htm.module.js",
    "vendor/preact.module.js",
    "vendor/uPlot.esm.js",
    "vendor/uPlot.min.css",
    "vendor/LICENSES/htm.txt",
    "vendor/LICENSES/preact.txt",
    "vendor/LICENSES/uplot.txt",
];

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    }
}

/// FNV-1a of the bytes, as an ETag.
fn etag(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("\"{hash:016x}\"")
}

/// The answer for an asset route.
pub fn answer(route: &Route, request: &Request) -> Result<Response, ConsoleError> {
    let Route::Asset(path) = route else {
        return Err(ConsoleError::NotFound(request.path.clone()));
    };
    let (path, bytes) = ASSETS
        .iter()
        .find(|(name, _)| name == path)
        .ok_or_else(|| ConsoleError::NotFound(request.path.clone()))?;
    let tag = etag(bytes);
    let headers = vec![("ETag", tag.clone()), ("Cache-Control", "no-cache".to_string())];
    if request.header("if-none-match") == Some(tag.as_str()) {
        return Ok(Response {
            status: "304 Not Modified",
            content_type: content_type(path),
            headers,
            body: Cow::Borrowed(&[]),
        });
    }
    Ok(Response {
        status: "200 OK",
        content_type: content_type(path),
        headers,
        body: Cow::Borrowed(bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn files(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                files(root, &path, out);
            } else {
                out.push(
                    path.strip_prefix(root).expect("under root").to_string_lossy().into_owned(),
                );
            }
        }
    }

    #[test]
    fn every_console_file_is_served_and_nothing_else() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("console");
        let mut found = Vec::new();
        files(&root, &root, &mut found);
        // The npm manifest and lock pin the vendored libraries; they are not served.
        found.retain(|path| !matches!(path.as_str(), "package.json" | "package-lock.json"));
        found.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|(path, _)| path.to_string()).collect();
        served.sort();
        assert_eq!(found, served, "broker/console/ and ASSETS differ");
    }

    #[test]
    fn every_relative_import_resolves_to_a_served_file() {
        for (path, bytes) in ASSETS.iter().filter(|(path, _)| path.ends_with(".js")) {
            let text = String::from_utf8_lossy(bytes);
            let base = Path::new(path).parent().unwrap_or(Path::new(""));
            for quoted in
                text.split(['"', '\'']).filter(|s| s.starts_with("./") || s.starts_with("../"))
            {
                if !quoted.ends_with(".js") {
                    continue;
                }
                let mut parts: Vec<&str> =
                    base.iter().map(|p| p.to_str().unwrap_or_default()).collect();
                for segment in quoted.split('/') {
                    match segment {
                        "." => {}
                        ".." => {
                            parts.pop();
                        }
                        other => parts.push(other),
                    }
                }
                let target = parts.join("/");
                assert!(
                    ASSETS.iter().any(|(p, _)| *p == target),
                    "{path} imports {quoted}: not served"
                );
            }
        }
    }
}
