//! The web console, served by every node's admin listener at `/` (shard 0).
//!
//! The pages are static files embedded in the binary (`assets`, from `broker/console/`); their
//! data comes from the JSON API here. Every figure and every action is a Kafka request made as
//! the logged-in user through `client::Caller` (this broker's `api::dispatch`, or another
//! broker's through an Envelope), so the console shows and does only what the user's ACLs
//! allow. `session` owns logins (SASL users: SCRAM from the cluster metadata, PLAIN from the
//! config), cookies and CSRF tokens; `route` is the one table of what is served and what each
//! path requires; `ConsoleError` becomes an HTTP status in one place (`status_of`).
//! Layer: beside `admin` in the process layer; it uses `api`, `node` and `peer`, and only
//! `admin` uses it.

pub mod actions;
pub mod assets;
pub mod charts;
pub mod client;
pub mod cluster;
pub mod groups;
pub mod http;
pub mod messages;
pub mod session;
pub mod topics;
pub mod transactions;

use crate::node::Node;
use client::{Caller, PeerPool};
use http::{Request, Response};
use serde_json::json;
use session::{Sessions, Visitor};
use shard::io::Storage;
use std::net::SocketAddr;
use std::rc::Rc;

/// What a console answer can fail with; `status_of` turns each into its HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsoleError {
    /// No session where one is needed (or it expired, or its credential changed).
    Unauthenticated,
    /// A login with a wrong user name or password (which of them is never said).
    LoginFailed,
    /// A cross-site request, a missing CSRF token, a wrong content type.
    Forbidden(String),
    /// The Host header names no address of this console (DNS rebinding).
    MisdirectedHost(String),
    NotFound(String),
    BadRequest(String),
    /// Too many logins at once.
    TooManyRequests,
    /// Another broker did not answer, or answered something unreadable.
    Unavailable(String),
    /// A Kafka error from a request (its code and what it was about).
    Kafka {
        code: i16,
        message: String,
    },
    /// The console could not build its own request (a bug).
    Internal(String),
}

/// The HTTP status and JSON body of an error (the one mapping).
fn status_of(error: &ConsoleError) -> (&'static str, String, String) {
    use crate::error::answered;
    match error {
        ConsoleError::Unauthenticated => {
            ("401 Unauthorized", "UNAUTHENTICATED".into(), "log in first".into())
        }
        ConsoleError::LoginFailed => (
            "401 Unauthorized",
            "SASL_AUTHENTICATION_FAILED".into(),
            "Invalid username or password".into(),
        ),
        ConsoleError::Forbidden(why) => ("403 Forbidden", "FORBIDDEN".into(), why.clone()),
        ConsoleError::MisdirectedHost(host) => {
            ("421 Misdirected Request", "MISDIRECTED".into(), format!("host {host:?}"))
        }
        ConsoleError::NotFound(what) => ("404 Not Found", "NOT_FOUND".into(), what.clone()),
        ConsoleError::BadRequest(why) => ("400 Bad Request", "BAD_REQUEST".into(), why.clone()),
        ConsoleError::TooManyRequests => {
            ("429 Too Many Requests", "TOO_MANY_REQUESTS".into(), "try again".into())
        }
        ConsoleError::Unavailable(why) => {
            ("503 Service Unavailable", "UNAVAILABLE".into(), why.clone())
        }
        ConsoleError::Internal(why) => {
            ("500 Internal Server Error", "INTERNAL".into(), why.clone())
        }
        ConsoleError::Kafka { code, message } => {
            let status = if answered::is_authorization_failure(*code) {
                "403 Forbidden"
            } else if answered::is_unknown_resource(*code) {
                "404 Not Found"
            } else {
                "400 Bad Request"
            };
            (status, answered::name(*code), message.clone())
        }
    }
}

impl ConsoleError {
    /// A Kafka answer's error code as a console error, `Ok` for none.
    pub fn check(code: i16, about: impl FnOnce() -> String) -> Result<(), ConsoleError> {
        if code == crate::error::NONE {
            Ok(())
        } else {
            Err(ConsoleError::Kafka { code, message: about() })
        }
    }

    /// The error's code name, for a part of a page that could not be read (`"..._error"`).
    pub fn code_name(&self) -> String {
        status_of(self).1
    }
}

pub type ConsoleResult = Result<serde_json::Value, ConsoleError>;

/// What a path serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Asset(String),
    Session,
    Login,
    Logout,
    Cluster,
    Topics,
    Topic(String),
    Messages(String, i32),
    Groups,
    Group(String),
    Transactions,
    Charts,
    CreateTopic,
    AlterTopicConfigs(String),
    DeleteRecords(String),
    ResetOffsets(String),
}

/// What a route requires of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The page's code and styles: no data in them.
    Public,
    /// Logging in: a same-origin JSON POST, no session yet.
    SameOrigin,
    /// A read: a session (an anonymous one when the cluster has no SASL users).
    Session,
    /// A change: a session, same origin, JSON, and the session's CSRF token.
    SessionAndToken,
}

impl Route {
    /// The route of a method and path, `None` when nothing is served there.
    pub fn of(method: &str, segments: &[String]) -> Option<Route> {
        let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
        let name = |index: usize| segments.get(index).cloned().unwrap_or_default();
        Some(match (method, parts.as_slice()) {
            ("GET", []) => Route::Asset("index.html".into()),
            ("GET", ["console", ..]) => Route::Asset(parts.get(1..)?.join("/")),
            ("GET", ["api", "session"]) => Route::Session,
            ("POST", ["api", "login"]) => Route::Login,
            ("POST", ["api", "logout"]) => Route::Logout,
            ("GET", ["api", "cluster"]) => Route::Cluster,
            ("GET", ["api", "topics"]) => Route::Topics,
            ("POST", ["api", "topics"]) => Route::CreateTopic,
            ("GET", ["api", "topics", _]) => Route::Topic(name(2)),
            ("GET", ["api", "topics", _, "partitions", partition, "messages"]) => {
                Route::Messages(name(2), partition.parse().ok()?)
            }
            ("POST", ["api", "topics", _, "configs"]) => Route::AlterTopicConfigs(name(2)),
            ("POST", ["api", "topics", _, "delete-records"]) => Route::DeleteRecords(name(2)),
            ("GET", ["api", "groups"]) => Route::Groups,
            ("GET", ["api", "groups", _]) => Route::Group(name(2)),
            ("POST", ["api", "groups", _, "offsets"]) => Route::ResetOffsets(name(2)),
            ("GET", ["api", "transactions"]) => Route::Transactions,
            ("GET", ["api", "charts"]) => Route::Charts,
            _ => return None,
        })
    }

    pub fn access(&self) -> Access {
        match self {
            Route::Asset(_) => Access::Public,
            Route::Login => Access::SameOrigin,
            Route::Session
            | Route::Cluster
            | Route::Topics
            | Route::Topic(_)
            | Route::Messages(..)
            | Route::Groups
            | Route::Group(_)
            | Route::Transactions
            | Route::Charts => Access::Session,
            Route::Logout
            | Route::CreateTopic
            | Route::AlterTopicConfigs(_)
            | Route::DeleteRecords(_)
            | Route::ResetOffsets(_) => Access::SessionAndToken,
        }
    }
}

/// The console of this node (one, on shard 0).
pub struct Console<S: Storage> {
    node: Rc<Node<S>>,
    sessions: Sessions,
    pool: PeerPool,
    pub charts: Rc<charts::Charts>,
    hosts: Vec<String>,
}

impl<S: Storage> Console<S> {
    pub fn new(node: Rc<Node<S>>) -> Console<S> {
        let hosts = allowed_hosts(&node);
        let charts = Rc::new(charts::Charts::new(node.config.console.chart_interval_ms));
        Console { sessions: Sessions::default(), pool: PeerPool::default(), charts, hosts, node }
    }

    /// Samples this node's counters for the charts, forever (a task on shard 0).
    pub async fn sample_forever(self: Rc<Self>) {
        self.charts.sample_forever(&self.node).await;
    }

    /// The answer to one request from `peer` (the browser's address).
    pub async fn answer(&self, request: &Request, peer: SocketAddr) -> Response {
        match self.route(request, peer).await {
            Ok(response) => response,
            Err(error) => {
                let (status, code, message) = status_of(&error);
                if matches!(error, ConsoleError::Forbidden(_) | ConsoleError::MisdirectedHost(_)) {
                    tracing::warn!(%peer, path = %request.path, %message, "console refused a request");
                }
                let mut body = json!({ "error": code, "message": message });
                if error == ConsoleError::Unauthenticated {
                    body["login_required"] = json!(true);
                }
                Response::json(status, &body)
            }
        }
    }

    async fn route(&self, request: &Request, peer: SocketAddr) -> Result<Response, ConsoleError> {
        let host = request.header("host").unwrap_or_default().to_ascii_lowercase();
        if !self.hosts.contains(&host) {
            return Err(ConsoleError::MisdirectedHost(host));
        }
        let segments = request.segments();
        let route = Route::of(&request.method, &segments)
            .ok_or_else(|| ConsoleError::NotFound(request.path.clone()))?;
        let visitor = match route.access() {
            Access::Public => return assets::answer(&route, request),
            Access::SameOrigin => {
                session::same_origin(request, &host)?;
                None
            }
            Access::Session => Some(self.sessions.visitor(&self.node, request, peer)?),
            Access::SessionAndToken => {
                session::same_origin(request, &host)?;
                let visitor = self.sessions.visitor(&self.node, request, peer)?;
                self.sessions.check_token(&visitor, request)?;
                Some(visitor)
            }
        };
        match visitor {
            None => self.sessions.log_in(&self.node, request, peer).await,
            Some(visitor) => self.serve(route, request, visitor, peer).await,
        }
    }

    async fn serve(
        &self,
        route: Route,
        request: &Request,
        visitor: Visitor,
        peer: SocketAddr,
    ) -> Result<Response, ConsoleError> {
        let caller = Caller {
            node: &self.node,
            pool: &self.pool,
            principal: visitor.principal.clone(),
            address: peer,
        };
        let body = match route {
            Route::Session => return Ok(self.sessions.describe(&self.node, &visitor)),
            Route::Logout => return Ok(self.sessions.log_out(&visitor)),
            Route::Cluster => cluster::cluster(&caller).await?,
            Route::Topics => topics::list(&caller).await?,
            Route::Topic(name) => topics::describe(&caller, &name).await?,
            Route::Messages(topic, partition) => {
                messages::read(&caller, &topic, partition, request).await?
            }
            Route::Groups => groups::list(&caller).await?,
            Route::Group(id) => groups::describe(&caller, &id).await?,
            Route::Transactions => transactions::list(&caller).await?,
            Route::Charts => self.charts.answer(&caller, request)?,
            Route::CreateTopic => actions::create_topic(&caller, request).await?,
            Route::AlterTopicConfigs(name) => {
                actions::alter_configs(&caller, &name, request).await?
            }
            Route::DeleteRecords(name) => actions::delete_records(&caller, &name, request).await?,
            Route::ResetOffsets(id) => actions::reset_offsets(&caller, &id, request).await?,
            Route::Asset(_) | Route::Login => {
                return Err(ConsoleError::NotFound(request.path.clone()))
            }
        };
        Ok(Response::json("200 OK", &body))
    }
}

/// The Host header values the console answers: loopback names and this node's addresses at
/// the admin port, and `console.allowed.hosts`. Anything else is a page of another site
/// reaching the console through a name it controls (DNS rebinding).
fn allowed_hosts<S: Storage>(node: &Node<S>) -> Vec<String> {
    let config = &node.config;
    let port = config.admin_listen.port();
    let mut hosts: Vec<String> =
        ["127.0.0.1", "localhost", "[::1]"].iter().map(|host| format!("{host}:{port}")).collect();
    hosts.push(match config.admin_listen.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]:{port}"),
        ip => format!("{ip}:{port}"),
    });
    hosts.push(format!("{}:{port}", config.advertise_host.to_ascii_lowercase()));
    hosts.extend(config.console.allowed_hosts.iter().cloned());
    hosts
}

/// A request body as JSON.
pub fn json_body(request: &Request) -> Result<serde_json::Value, ConsoleError> {
    serde_json::from_slice(&request.body)
        .map_err(|error| ConsoleError::BadRequest(format!("the body is not JSON: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: &str, path: &str) -> Option<Route> {
        let segments: Vec<String> =
            path.split('/').filter(|s| !s.is_empty()).map(http::percent_decode).collect();
        Route::of(method, &segments)
    }

    #[test]
    fn paths_map_to_routes_and_every_data_route_needs_a_session() {
        assert_eq!(route("GET", "/"), Some(Route::Asset("index.html".into())));
        assert_eq!(
            route("GET", "/console/pages/topics.js"),
            Some(Route::Asset("pages/topics.js".into()))
        );
        assert_eq!(route("GET", "/api/topics/a%2Fb"), Some(Route::Topic("a/b".into())));
        assert_eq!(
            route("GET", "/api/topics/t/partitions/3/messages"),
            Some(Route::Messages("t".into(), 3))
        );
        assert_eq!(route("GET", "/api/topics/t/partitions/x/messages"), None);
        assert_eq!(route("DELETE", "/api/topics/t"), None);
        assert_eq!(route("GET", "/api/login"), None, "logging in is a POST only");
        for (method, path) in EXAMPLES {
            let access = route(method, path).expect(path).access();
            match *method {
                "GET" => assert_eq!(access, Access::Session, "{path}"),
                _ if *path == "/api/login" => assert_eq!(access, Access::SameOrigin),
                _ => assert_eq!(access, Access::SessionAndToken, "{path}"),
            }
        }
    }

    /// One request per data route (the in-process tests send each without a session).
    pub const EXAMPLES: &[(&str, &str)] = &[
        ("GET", "/api/session"),
        ("POST", "/api/login"),
        ("POST", "/api/logout"),
        ("GET", "/api/cluster"),
        ("GET", "/api/topics"),
        ("POST", "/api/topics"),
        ("GET", "/api/topics/t"),
        ("GET", "/api/topics/t/partitions/0/messages"),
        ("POST", "/api/topics/t/configs"),
        ("POST", "/api/topics/t/delete-records"),
        ("GET", "/api/groups"),
        ("GET", "/api/groups/g"),
        ("POST", "/api/groups/g/offsets"),
        ("GET", "/api/transactions"),
        ("GET", "/api/charts"),
    ];
}
