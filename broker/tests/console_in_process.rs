//! The console's access rules, fast, on an in-process node (the browser tests in
//! `tests/interop/test_console.py` check the same against real clusters): with a SASL listener
//! nothing but the page code and the login answers without a session; a login is checked
//! against the SCRAM credentials and a session ends when they change; changes need the
//! console's own origin, JSON and the CSRF token; a foreign Host is refused; ACLs decide what
//! a user sees.

use broker::console::http::{Request, Response};
use broker::console::Console;
use broker::in_process::{test_config, InProcess};
use broker::request_context::{Principal, RequestContext};
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::rc::Rc;

const HOST: &str = "127.0.0.1:9644";
const ORIGIN: &str = "http://127.0.0.1:9644";
const PEER: ([u8; 4], u16) = ([127, 0, 0, 1], 50_000);

fn sasl_config() -> broker::config::BrokerConfig {
    let mut config = test_config();
    for listener in &mut config.listeners {
        listener.sasl = true;
    }
    config.sasl = Some(broker::config::security::SaslSettings {
        mechanisms: vec!["SCRAM-SHA-256".into()],
        plain_users: BTreeMap::new(),
        max_receive_bytes: 524_288,
        failure_delay_ms: 0,
        reauth_ms: 0,
    });
    config.authorizer = broker::config::security::authorizer(
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "User:admin",
        "false",
    )
    .expect("valid");
    config
}

fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Request {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let mut all = vec![("host".to_string(), HOST.to_string())];
    all.extend(headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())));
    Request {
        method: method.into(),
        path: path.into(),
        query: query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.to_string(), v.to_string())
            })
            .collect(),
        headers: all,
        body: body.as_bytes().to_vec(),
    }
}

fn status(response: &Response) -> u16 {
    response.status.split(' ').next().and_then(|s| s.parse().ok()).expect("a status")
}

fn json(response: &Response) -> serde_json::Value {
    serde_json::from_slice(&response.body).expect("a JSON body")
}

fn cookie_of(response: &Response) -> String {
    let set = response.headers.iter().find(|(name, _)| *name == "Set-Cookie").expect("a cookie");
    set.1.split(';').next().expect("name=value").to_string()
}

async fn scram_user(broker: &InProcess, name: &str, password: &str) {
    let mechanism = broker::sasl::scram::ScramMechanism::Sha256;
    let salt = b"console-test-salt";
    let mut upsertion = ScramCredentialUpsertion::default();
    upsertion.name = StrBytes::from_string(name.into());
    upsertion.mechanism = mechanism.code();
    upsertion.iterations = 4096;
    upsertion.salt = Bytes::from_static(salt);
    upsertion.salted_password =
        Bytes::from(mechanism.salted_password(password.as_bytes(), salt, 4096));
    let mut alter = AlterUserScramCredentialsRequest::default();
    alter.upsertions.push(upsertion);
    let answer = broker.call_in(&as_admin(ApiKey::AlterUserScramCredentials, 0), alter).await;
    assert!(
        matches!(answer, Some(ResponseKind::AlterUserScramCredentials(r)) if r.results[0].error_code == 0)
    );
}

fn as_admin(key: ApiKey, version: i16) -> RequestContext {
    let mut context = RequestContext::internal(key, version);
    context.principal = Principal::User("admin".into());
    context
}

async fn create_topic(broker: &InProcess, name: &str) {
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_string(name.into()));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    let mut create = CreateTopicsRequest::default();
    create.topics = vec![topic];
    let answer = broker.call_in(&as_admin(ApiKey::CreateTopics, 7), create).await;
    assert!(matches!(answer, Some(ResponseKind::CreateTopics(r)) if r.topics[0].error_code == 0));
}

/// (method, path, body) of every data route.
const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/api/session", ""),
    ("POST", "/api/logout", "{}"),
    ("GET", "/api/cluster", ""),
    ("GET", "/api/topics", ""),
    ("POST", "/api/topics", r#"{"name":"x","partitions":1,"replication_factor":1}"#),
    ("GET", "/api/topics/t", ""),
    ("GET", "/api/topics/t/partitions/0/messages", ""),
    ("POST", "/api/topics/t/configs", r#"{"set":{"retention.ms":"1"}}"#),
    ("POST", "/api/topics/t/delete-records", r#"{"partitions":{"0":1}}"#),
    ("GET", "/api/groups", ""),
    ("GET", "/api/groups/g", ""),
    ("POST", "/api/groups/g/offsets", r#"{"to":"earliest"}"#),
    ("GET", "/api/transactions", ""),
    ("GET", "/api/charts", ""),
];

#[test]
fn with_sasl_nothing_but_the_page_and_the_login_answers_without_a_session() {
    InProcess::run(|| async {
        let broker = InProcess::start(sasl_config(), 1).await;
        let console = Console::new(broker.node.clone());
        let peer = PEER.into();
        let post =
            [("Origin", ORIGIN), ("Content-Type", "application/json"), ("X-Strata-Csrf", "x")];
        for (method, path, body) in ROUTES {
            for cookie in ["", "strata_console=forged"] {
                let mut headers = post.to_vec();
                headers.push(("Cookie", cookie));
                let answer = console.answer(&request(method, path, &headers, body), peer).await;
                assert_eq!(status(&answer), 401, "{method} {path} with cookie {cookie:?}");
                assert_eq!(json(&answer)["login_required"], true);
            }
        }
        // The page's code is public (it holds no data), the login is not a data route.
        assert_eq!(status(&console.answer(&request("GET", "/", &[], ""), peer).await), 200);
        let js = console.answer(&request("GET", "/console/app.js", &[], ""), peer).await;
        assert_eq!((status(&js), js.content_type), (200, "text/javascript; charset=utf-8"));
        broker.close().await;
    });
}

#[test]
fn a_login_checks_the_scram_password_and_its_session_ends_when_the_credential_changes() {
    InProcess::run(|| async {
        let broker = InProcess::start(sasl_config(), 2).await;
        let console = Console::new(broker.node.clone());
        let peer = PEER.into();
        scram_user(&broker, "alice", "alice-secret").await;
        create_topic(&broker, "alice-orders").await;
        create_topic(&broker, "secret").await;
        let login = |password: &str| {
            let body = format!(r#"{{"user":"alice","password":"{password}"}}"#);
            request(
                "POST",
                "/api/login",
                &[("Origin", ORIGIN), ("Content-Type", "application/json")],
                &body,
            )
        };
        let wrong = console.answer(&login("guess"), peer).await;
        assert_eq!(status(&wrong), 401);
        assert_eq!(json(&wrong)["error"], "SASL_AUTHENTICATION_FAILED");
        // A login from another site is refused before the password is looked at.
        let mut cross = login("alice-secret");
        cross.headers.retain(|(k, _)| k != "origin");
        cross.headers.push(("origin".into(), "http://127.0.0.1:8000".into()));
        assert_eq!(status(&console.answer(&cross, peer).await), 403);

        let answer = console.answer(&login("alice-secret"), peer).await;
        assert_eq!(status(&answer), 200, "{:?}", json(&answer));
        let cookie = cookie_of(&answer);
        let csrf = json(&answer)["csrf"].as_str().expect("a token").to_string();
        let with = |method: &str, path: &str, extra: &[(&str, &str)], body: &str| {
            let mut headers = vec![("Cookie", cookie.as_str())];
            headers.extend_from_slice(extra);
            request(method, path, &headers, body)
        };
        let session = console.answer(&with("GET", "/api/session", &[], ""), peer).await;
        assert_eq!(json(&session)["user"], "alice");

        // No ACL grants alice anything: she sees no topic, and creating one is refused by the
        // handler with Kafka's error.
        let topics = json(&console.answer(&with("GET", "/api/topics", &[], ""), peer).await);
        assert_eq!(topics["topics"], serde_json::json!([]), "{topics}");
        let secret = console.answer(&with("GET", "/api/topics/secret", &[], ""), peer).await;
        assert_eq!(
            (status(&secret), json(&secret)["error"].clone()),
            (403, "TOPIC_AUTHORIZATION_FAILED".into())
        );
        let body = r#"{"name":"alice-new","partitions":1,"replication_factor":1}"#;
        let good = [
            ("Origin", ORIGIN),
            ("Content-Type", "application/json"),
            ("X-Strata-Csrf", csrf.as_str()),
        ];
        let created = json(&console.answer(&with("POST", "/api/topics", &good, body), peer).await);
        assert_eq!(created["ok"], false);
        assert_eq!(created["results"][0]["error"], "TOPIC_AUTHORIZATION_FAILED");

        // Changes need all three: the origin, JSON, the token.
        let no_token = [("Origin", ORIGIN), ("Content-Type", "application/json")];
        let form =
            [("Origin", ORIGIN), ("Content-Type", "text/plain"), ("X-Strata-Csrf", csrf.as_str())];
        let foreign = [
            ("Origin", "http://evil.example"),
            ("Content-Type", "application/json"),
            ("X-Strata-Csrf", csrf.as_str()),
        ];
        let cross_port = [
            ("Origin", "http://127.0.0.1:8000"),
            ("Content-Type", "application/json"),
            ("X-Strata-Csrf", csrf.as_str()),
        ];
        for headers in [&no_token[..], &form[..], &foreign[..], &cross_port[..]] {
            let answer = console.answer(&with("POST", "/api/topics", headers, body), peer).await;
            assert_eq!(status(&answer), 403, "{headers:?}");
        }
        // A Host that names no address of this console (DNS rebinding) is refused.
        let mut rebound = with("GET", "/api/session", &[], "");
        rebound.headers.retain(|(k, _)| k != "host");
        rebound.headers.push(("host".into(), "attacker.example:9644".into()));
        assert_eq!(status(&console.answer(&rebound, peer).await), 421);

        // Her password changes: the session ends.
        scram_user(&broker, "alice", "new-secret").await;
        let after = console.answer(&with("GET", "/api/session", &[], ""), peer).await;
        assert_eq!(status(&after), 401);
        broker.close().await;
    });
}

#[test]
fn without_sasl_visitors_are_anonymous_and_still_need_the_token_to_change_anything() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 3).await;
        let console = Rc::new(Console::new(broker.node.clone()));
        let peer = PEER.into();
        let session = console.answer(&request("GET", "/api/session", &[], ""), peer).await;
        assert_eq!(status(&session), 200);
        assert_eq!(json(&session)["user"], serde_json::Value::Null);
        assert_eq!(json(&session)["login_required"], false);
        let cookie = cookie_of(&session);
        let csrf = json(&session)["csrf"].as_str().expect("a token").to_string();
        let body = r#"{"name":"made-here","partitions":2,"replication_factor":1}"#;
        let without =
            [("Cookie", cookie.as_str()), ("Origin", ORIGIN), ("Content-Type", "application/json")];
        assert_eq!(
            status(&console.answer(&request("POST", "/api/topics", &without, body), peer).await),
            403
        );
        let with = [
            ("Cookie", cookie.as_str()),
            ("Origin", ORIGIN),
            ("Content-Type", "application/json"),
            ("X-Strata-Csrf", csrf.as_str()),
        ];
        let created =
            json(&console.answer(&request("POST", "/api/topics", &with, body), peer).await);
        assert_eq!(created["ok"], true, "{created}");
        let topic =
            json(&console.answer(&request("GET", "/api/topics/made-here", &[], ""), peer).await);
        assert_eq!(topic["partitions"].as_array().map(Vec::len), Some(2), "{topic}");
        // Looking at a topic that does not exist never creates it.
        let missing =
            console.answer(&request("GET", "/api/topics/nothing-here", &[], ""), peer).await;
        assert_eq!(status(&missing), 404);
        let listed = json(&console.answer(&request("GET", "/api/topics", &[], ""), peer).await);
        let names: Vec<&str> = listed["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(names.contains(&"made-here") && !names.contains(&"nothing-here"), "{names:?}");
        broker.close().await;
    });
}
