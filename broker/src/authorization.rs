//! What a principal may do, as Kafka reports it: ACL operations and the authorized-operations
//! bit fields of Metadata, DescribeCluster and DescribeGroups (KIP-430).
//!
//! Owns: `AclOperation` (Kafka's `AclOperation` codes), the sets of operations each resource
//! type has, and `Authorizer`: the decision whether a principal may do an operation on a
//! resource, from the ACLs of the metadata image (`metadata::acl`) with Kafka's rules
//! (`StandardAuthorizer`): `super.users` first, then any matching DENY, then a matching ALLOW
//! (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS),
//! then `allow.everyone.if.no.acl.found` when no ACL covers the resource. With no authorizer
//! configured every principal may do everything, and the authorized-operations fields are the
//! full sets (what Kafka answers then).
//! References: Kafka `org.apache.kafka.common.acl.AclOperation`, `AclEntry.supportedOperations`,
//! `StandardAuthorizerData.authorize`.

use crate::metadata::acl::{AclBinding, Acls, Permission, ResourceType, CLUSTER_NAME};
use crate::metadata::acl::{WILDCARD, WILDCARD_PRINCIPAL};

pub use crate::metadata::acl::AclOperation;

use AclOperation::*;

/// A resource a request acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource<'a> {
    Topic(&'a str),
    Group(&'a str),
    Cluster,
    TransactionalId(&'a str),
}

impl Resource<'_> {
    fn parts(&self) -> (ResourceType, &str) {
        match *self {
            Resource::Topic(name) => (ResourceType::Topic, name),
            Resource::Group(name) => (ResourceType::Group, name),
            Resource::Cluster => (ResourceType::Cluster, CLUSTER_NAME),
            Resource::TransactionalId(name) => (ResourceType::TransactionalId, name),
        }
    }
}

/// The broker's authorizer settings (`authorizer.class.name`, `super.users`,
/// `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Authorizer {
    /// `authorizer.class.name` is set: ACLs are enforced. Off, everything is allowed.
    pub enabled: bool,
    /// `super.users`: principals (`User:admin`) allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

impl Authorizer {
    /// Whether `principal` (`User:alice`) connecting from `host` (an IP address) may do
    /// `operation` on `resource`, given the image's ACLs.
    pub fn authorize(
        &self,
        acls: &Acls,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource: Resource<'_>,
    ) -> bool {
        if !self.enabled || self.super_users.iter().any(|user| user == principal) {
            return true;
        }
        let (kind, name) = resource.parts();
        let mut covered = false;
        let mut allowed = false;
        for acl in acls.covering(kind, name) {
            covered = true;
            if !applies(acl, principal, host) {
                continue;
            }
            match acl.permission {
                Permission::Deny if acl.operation == operation || acl.operation == All => {
                    return false
                }
                Permission::Allow if acl.operation.implies(operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!covered && self.allow_if_no_acl)
    }

    /// Whether `principal` may do `operation` on some resource of `kind` (Kafka's
    /// `authorizeByResourceType`, used for IDEMPOTENT_WRITE's "WRITE on any topic"): an ALLOW
    /// for it whose own pattern is not denied to it.
    pub fn authorize_any(
        &self,
        acls: &Acls,
        principal: &str,
        host: &str,
        operation: AclOperation,
        kind: ResourceType,
    ) -> bool {
        if !self.enabled || self.super_users.iter().any(|user| user == principal) {
            return true;
        }
        let resource = |name| match kind {
            ResourceType::Topic => Resource::Topic(name),
            ResourceType::Group => Resource::Group(name),
            ResourceType::Cluster => Resource::Cluster,
            ResourceType::TransactionalId => Resource::TransactionalId(name),
        };
        let granted = acls.of_type(kind).any(|acl| {
            acl.permission == Permission::Allow
                && acl.operation.implies(operation)
                && applies(acl, principal, host)
                && self.authorize(acls, principal, host, operation, resource(&acl.resource_name))
        });
        granted || (self.allow_if_no_acl && acls.of_type(kind).next().is_none())
    }

    /// The authorized-operations field (KIP-430) of a resource with `operations`: those the
    /// principal may do, or "not requested".
    pub fn authorized_operations(
        &self,
        requested: bool,
        acls: &Acls,
        principal: &str,
        host: &str,
        operations: &[AclOperation],
        resource: Resource<'_>,
    ) -> i32 {
        if !requested {
            return NOT_REQUESTED;
        }
        let allowed: Vec<AclOperation> = operations
            .iter()
            .copied()
            .filter(|operation| self.authorize(acls, principal, host, *operation, resource))
            .collect();
        bits(&allowed)
    }
}

/// Whether an ACL names this principal (or every user) and this host (or every host).
fn applies(acl: &AclBinding, principal: &str, host: &str) -> bool {
    (acl.principal == principal || acl.principal == WILDCARD_PRINCIPAL)
        && (acl.host == WILDCARD || acl.host == host)
}

/// The operations a topic has (Kafka's `AclEntry.supportedOperations(TOPIC)`).
pub const TOPIC_OPERATIONS: &[AclOperation] =
    &[Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs];
/// The operations the cluster has.
pub const CLUSTER_OPERATIONS: &[AclOperation] =
    &[Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite];
/// The operations a consumer group has (Kafka 4 added the group configs of KIP-848).
pub const GROUP_OPERATIONS: &[AclOperation] =
    &[Read, Delete, Describe, DescribeConfigs, AlterConfigs];

/// The bit field of a set of operations.
pub fn bits(operations: &[AclOperation]) -> i32 {
    operations.iter().fold(0, |bits, operation| bits | 1 << (*operation as i8))
}

/// The value of an authorized-operations field the client did not ask for.
pub const NOT_REQUESTED: i32 = i32::MIN;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::acl::PatternType;

    #[test]
    fn the_full_sets_are_kafkas() {
        // READ..ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka returns without
        // an authorizer (e.g. kafka-topics --describe through AdminClient).
        assert_eq!(bits(TOPIC_OPERATIONS), 3576);
        assert_eq!(bits(CLUSTER_OPERATIONS), 8096);
        assert_eq!(bits(GROUP_OPERATIONS), 3400);
        let off = Authorizer::default();
        let acls = Acls::default();
        let all = off.authorized_operations(
            true,
            &acls,
            "User:x",
            "1.2.3.4",
            TOPIC_OPERATIONS,
            Resource::Topic("t"),
        );
        assert_eq!(all, 3576);
        let none = off.authorized_operations(
            false,
            &acls,
            "User:x",
            "1.2.3.4",
            TOPIC_OPERATIONS,
            Resource::Topic("t"),
        );
        assert_eq!(none, -2147483648);
    }

    fn acl(
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: AclOperation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission,
        }
    }

    #[test]
    fn kafkas_rules_deny_first_then_allow_with_implied_describe() {
        let on = Authorizer {
            enabled: true,
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        };
        let mut acls = Acls::default();
        acls.insert(
            [1; 16],
            acl("a-", PatternType::Prefixed, "User:alice", Read, Permission::Allow),
        );
        acls.insert(
            [2; 16],
            acl("a-", PatternType::Prefixed, "User:alice", Write, Permission::Allow),
        );
        acls.insert(
            [3; 16],
            acl("a-locked", PatternType::Literal, "User:alice", Write, Permission::Deny),
        );
        acls.insert([4; 16], acl("*", PatternType::Literal, "User:*", Describe, Permission::Allow));
        let alice = |operation, name| {
            on.authorize(&acls, "User:alice", "127.0.0.1", operation, Resource::Topic(name))
        };
        assert!(alice(Read, "a-orders"));
        assert!(alice(Write, "a-orders"));
        assert!(alice(Describe, "a-orders"));
        assert!(!alice(Delete, "a-orders"));
        assert!(!alice(Write, "a-locked"), "DENY beats ALLOW");
        assert!(alice(Read, "a-locked"));
        assert!(!alice(Read, "b-other"));
        assert!(alice(Describe, "b-other"), "User:* on the wildcard");
        let bob = |operation, name| {
            on.authorize(&acls, "User:bob", "127.0.0.1", operation, Resource::Topic(name))
        };
        assert!(!bob(Read, "a-orders"));
        assert!(on.authorize(&acls, "User:admin", "1.1.1.1", Delete, Resource::Cluster));
        assert!(!on.authorize(&acls, "User:alice", "1.1.1.1", Alter, Resource::Cluster));
        // No ACL covers a group: denied, unless allow.everyone.if.no.acl.found.
        assert!(!on.authorize(&acls, "User:alice", "h", Read, Resource::Group("g")));
        let open = Authorizer { allow_if_no_acl: true, ..on.clone() };
        assert!(open.authorize(&acls, "User:alice", "h", Read, Resource::Group("g")));
        assert!(
            !open.authorize(&acls, "User:bob", "h", Read, Resource::Topic("a-orders")),
            "covered"
        );
        assert!(on.authorize_any(&acls, "User:alice", "h", Write, ResourceType::Topic));
        assert!(!on.authorize_any(&acls, "User:bob", "h", Write, ResourceType::Topic));
        let bits = on.authorized_operations(
            true,
            &acls,
            "User:alice",
            "h",
            TOPIC_OPERATIONS,
            Resource::Topic("a-x"),
        );
        assert_eq!(bits, super::bits(&[Read, Write, Describe]));
    }
}
