//! ACLs in the cluster metadata (issue #18): Kafka's ACL bindings (KIP-801's
//! AccessControlEntryRecord), the index a check reads, CreateAcls and DeleteAcls decided
//! against an image with the rules of Kafka's `AclControlManager`, and the filters of
//! DescribeAcls and DeleteAcls (`AclBindingFilter`).
//!
//! Owns: `AclOperation`, `AclBinding` (a resource pattern and an entry: who, from where, which
//! operation, allowed or denied), `Acls` (every binding by id, and by resource so a check is a
//! few map lookups), `AclFilter`. The records CreateAcls and DeleteAcls decide are `acls`'. The decision itself (super users, DENY first, implied operations) is
//! `crate::authorization`'s.
//! References: Kafka `AclControlManager`, `ResourcePatternFilter.matches`,
//! `AccessControlEntryFilter.matches`; KIP-290 (prefixed patterns).

use crate::error::{BrokerError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An ACL's id in the metadata (random, as Kafka's KRaft controller gives them).
pub type AclId = [u8; 16];

/// The only name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A LITERAL name or principal that matches every one.
pub const WILDCARD: &str = "*";
/// The principal that matches every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Kafka's ACL operation codes (the bit a set gives each operation is `1 << code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[repr(i8)]
pub enum AclOperation {
    /// Every operation (in an ACL; never asked for).
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
}

impl AclOperation {
    pub fn code(self) -> i8 {
        self as i8
    }

    /// An operation an ACL may name (ALL..IDEMPOTENT_WRITE); UNKNOWN, ANY and the delegation
    /// token operations are not.
    pub fn from_code(code: i8) -> Option<Self> {
        use AclOperation::*;
        [
            All,
            Read,
            Write,
            Create,
            Delete,
            Alter,
            Describe,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
        ]
        .into_iter()
        .find(|operation| *operation as i8 == code)
    }

    /// Whether an ALLOW of `self` allows `wanted`.
    pub fn implies(self, wanted: AclOperation) -> bool {
        use AclOperation::*;
        self == All
            || self == wanted
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }
}

/// Kafka's `ResourceType` (codes on the wire: ANY 1, TOPIC 2, ...). strata authorizes these
/// four; USER and DELEGATION_TOKEN resources are refused (no delegation tokens here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

impl ResourceType {
    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            2 => Some(ResourceType::Topic),
            3 => Some(ResourceType::Group),
            4 => Some(ResourceType::Cluster),
            5 => Some(ResourceType::TransactionalId),
            _ => None,
        }
    }
}

/// Kafka's `PatternType` of a stored binding: LITERAL (3) or PREFIXED (4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PatternType {
    Literal,
    Prefixed,
}

impl PatternType {
    pub fn code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }
}

/// Kafka's `AclPermissionType`: DENY (2) or ALLOW (3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub fn code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }
}

/// One ACL: a resource pattern and an access control entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `User:alice`, `User:*`.
    pub principal: String,
    /// A client IP address, or `*`.
    pub host: String,
    pub operation: AclOperation,
    pub permission: Permission,
}

impl AclBinding {
    /// A binding from CreateAcls' codes, checked as Kafka's controller checks a new ACL.
    #[allow(clippy::too_many_arguments)]
    pub fn from_wire(
        resource_type: i8,
        resource_name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<Self> {
        let invalid = |why: String| BrokerError::InvalidRequest(why);
        let resource_type = ResourceType::from_code(resource_type).ok_or_else(|| {
            invalid(format!(
                "Invalid resourceType {resource_type}: strata authorizes TOPIC, GROUP, CLUSTER \
                 and TRANSACTIONAL_ID"
            ))
        })?;
        let pattern_type = match pattern_type {
            3 => PatternType::Literal,
            4 => PatternType::Prefixed,
            other => return Err(invalid(format!("Invalid patternType {other}"))),
        };
        let operation = AclOperation::from_code(operation)
            .ok_or_else(|| invalid(format!("Invalid operation {operation}")))?;
        let permission = Permission::from_code(permission)
            .ok_or_else(|| invalid(format!("Invalid permissionType {permission}")))?;
        if resource_name.is_empty() {
            return Err(invalid("Resource name should not be empty".into()));
        }
        if resource_type == ResourceType::Cluster && resource_name != CLUSTER_NAME {
            return Err(invalid(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )));
        }
        match principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Err(invalid(format!(
                    "Could not parse principal from `{principal}` (no colon is present \
                     separating the principal type from name)"
                )))
            }
        }
        if host.is_empty() {
            return Err(invalid("Invalid host: empty".into()));
        }
        Ok(AclBinding {
            resource_type,
            resource_name: resource_name.to_string(),
            pattern_type,
            principal: principal.to_string(),
            host: host.to_string(),
            operation,
            permission,
        })
    }
}

/// Every ACL, by id and by resource pattern. Both maps change together (`insert`,
/// `remove`), so a check never scans the whole list: by (type, pattern type), then by name,
/// looked up with the resource's name borrowed (no allocation per check).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acls {
    by_id: BTreeMap<AclId, AclBinding>,
    by_pattern: BTreeMap<(ResourceType, PatternType), BTreeMap<String, Vec<AclBinding>>>,
}

impl Acls {
    pub fn insert(&mut self, id: AclId, binding: AclBinding) {
        if let Some(previous) = self.by_id.insert(id, binding.clone()) {
            self.unindex(&previous);
        }
        self.by_pattern
            .entry((binding.resource_type, binding.pattern_type))
            .or_default()
            .entry(binding.resource_name.clone())
            .or_default()
            .push(binding);
    }

    pub fn remove(&mut self, id: &AclId) -> Option<AclBinding> {
        let binding = self.by_id.remove(id)?;
        self.unindex(&binding);
        Some(binding)
    }

    fn unindex(&mut self, binding: &AclBinding) {
        let key = (binding.resource_type, binding.pattern_type);
        let Some(names) = self.by_pattern.get_mut(&key) else { return };
        if let Some(list) = names.get_mut(&binding.resource_name) {
            if let Some(index) = list.iter().position(|other| other == binding) {
                list.swap_remove(index);
            }
            if list.is_empty() {
                names.remove(&binding.resource_name);
            }
        }
        if names.is_empty() {
            self.by_pattern.remove(&key);
        }
    }

    pub fn contains(&self, id: &AclId) -> bool {
        self.by_id.contains_key(id)
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&AclId, &AclBinding)> {
        self.by_id.iter()
    }

    /// The id of a binding equal to `binding`, if one is stored.
    pub fn find(&self, binding: &AclBinding) -> Option<AclId> {
        self.by_pattern
            .get(&(binding.resource_type, binding.pattern_type))?
            .get(&binding.resource_name)?
            .iter()
            .find(|other| *other == binding)?;
        self.by_id.iter().find(|(_, other)| *other == binding).map(|(id, _)| *id)
    }

    /// The bindings whose pattern covers the resource `name` of `resource_type`: LITERAL on the
    /// name or on `*`, and PREFIXED on any prefix of the name (a lookup per prefix).
    pub fn covering<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let literal = self.by_pattern.get(&(resource_type, PatternType::Literal));
        let prefixed = self.by_pattern.get(&(resource_type, PatternType::Prefixed));
        let exact = literal.and_then(|names| names.get(name));
        let wildcard = literal.filter(|_| name != WILDCARD).and_then(|names| names.get(WILDCARD));
        let prefixes = prefixed.into_iter().flat_map(move |names| {
            (1..=name.len())
                .filter(move |end| name.is_char_boundary(*end))
                .filter_map(move |end| names.get(&name[..end]))
        });
        exact.into_iter().chain(wildcard).chain(prefixes).flatten()
    }

    /// The bindings of `resource_type` (any pattern, any name).
    pub fn of_type(&self, resource_type: ResourceType) -> impl Iterator<Item = &AclBinding> {
        self.by_pattern
            .iter()
            .filter(move |((kind, _), _)| *kind == resource_type)
            .flat_map(|(_, names)| names.values().flatten())
    }
}

/// How a filter matches resource patterns (Kafka's `PatternType` in a filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// ANY: every pattern type, the name matched exactly.
    Any,
    /// MATCH: the patterns that cover the name (LITERAL equal or `*`, PREFIXED a prefix).
    Match,
    Exactly(PatternType),
}

/// DescribeAcls' and DeleteAcls' filter (Kafka's `AclBindingFilter`): `None` matches any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<AclOperation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// A filter from the wire's codes; one with an UNKNOWN part (or a code strata does not
    /// know) is refused, as Kafka refuses it.
    #[allow(clippy::too_many_arguments)]
    pub fn from_wire(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<Self> {
        let invalid = |why: &str| BrokerError::InvalidRequest(why.to_string());
        let resource_type = match resource_type {
            1 => None,
            code => Some(
                ResourceType::from_code(code)
                    .ok_or_else(|| invalid("Unknown patternFilter: resource type"))?,
            ),
        };
        let pattern = match pattern_type {
            1 => PatternFilter::Any,
            2 => PatternFilter::Match,
            3 => PatternFilter::Exactly(PatternType::Literal),
            4 => PatternFilter::Exactly(PatternType::Prefixed),
            _ => return Err(invalid("Unknown patternFilter: pattern type")),
        };
        let operation = match operation {
            1 => None,
            code => Some(
                AclOperation::from_code(code)
                    .ok_or_else(|| invalid("Unknown entryFilter: operation"))?,
            ),
        };
        let permission = match permission {
            1 => None,
            code => Some(
                Permission::from_code(code)
                    .ok_or_else(|| invalid("Unknown entryFilter: permission type"))?,
            ),
        };
        Ok(AclFilter {
            resource_type,
            resource_name: resource_name.map(str::to_string),
            pattern,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation,
            permission,
        })
    }

    pub fn matches(&self, binding: &AclBinding) -> bool {
        if self.resource_type.is_some_and(|kind| kind != binding.resource_type) {
            return false;
        }
        if let PatternFilter::Exactly(kind) = self.pattern {
            if kind != binding.pattern_type {
                return false;
            }
        }
        let name_matches = match (&self.resource_name, self.pattern) {
            (None, _) => true,
            (Some(name), PatternFilter::Any | PatternFilter::Exactly(_)) => {
                *name == binding.resource_name
            }
            (Some(name), PatternFilter::Match) => match binding.pattern_type {
                PatternType::Literal => {
                    *name == binding.resource_name || binding.resource_name == WILDCARD
                }
                PatternType::Prefixed => name.starts_with(&binding.resource_name),
            },
        };
        name_matches
            && self.principal.as_ref().is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && self.operation.is_none_or(|o| o == binding.operation)
            && self.permission.is_none_or(|p| p == binding.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(kind: ResourceType, name: &str, pattern: PatternType) -> AclBinding {
        AclBinding {
            resource_type: kind,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn new_bindings_are_checked_as_kafkas_controller_checks_them() {
        let ok = AclBinding::from_wire(2, "a-", 4, "User:alice", "*", 3, 3).unwrap();
        assert_eq!(ok.pattern_type, PatternType::Prefixed);
        for (kind, name, pattern, principal, operation, permission) in [
            (1, "t", 3, "User:a", 3, 3),     // resource type ANY
            (2, "t", 2, "User:a", 3, 3),     // pattern MATCH
            (2, "t", 3, "alice", 3, 3),      // no principal type
            (2, "t", 3, "User:a", 1, 3),     // operation ANY
            (2, "t", 3, "User:a", 3, 1),     // permission ANY
            (2, "", 3, "User:a", 3, 3),      // empty name
            (4, "other", 3, "User:a", 7, 3), // a cluster not named kafka-cluster
        ] {
            let result =
                AclBinding::from_wire(kind, name, pattern, principal, "*", operation, permission);
            assert!(matches!(result, Err(BrokerError::InvalidRequest(_))), "{name} {principal}");
        }
    }

    #[test]
    fn covering_finds_literal_wildcard_and_prefixes_only() {
        let mut acls = Acls::default();
        acls.insert([1; 16], binding(ResourceType::Topic, "a-orders", PatternType::Literal));
        acls.insert([2; 16], binding(ResourceType::Topic, "*", PatternType::Literal));
        acls.insert([3; 16], binding(ResourceType::Topic, "a-", PatternType::Prefixed));
        acls.insert([4; 16], binding(ResourceType::Topic, "b-", PatternType::Prefixed));
        acls.insert([5; 16], binding(ResourceType::Group, "a-orders", PatternType::Literal));
        let names = |acls: &Acls, name: &str| {
            let mut found: Vec<String> = acls
                .covering(ResourceType::Topic, name)
                .map(|b| format!("{:?}:{}", b.pattern_type, b.resource_name))
                .collect();
            found.sort();
            found
        };
        assert_eq!(names(&acls, "a-orders"), ["Literal:*", "Literal:a-orders", "Prefixed:a-"]);
        assert_eq!(names(&acls, "a-"), ["Literal:*", "Prefixed:a-"]);
        assert_eq!(names(&acls, "c"), ["Literal:*"]);
        assert_eq!(acls.remove(&[2; 16]).map(|b| b.resource_name), Some("*".to_string()));
        assert_eq!(names(&acls, "c"), Vec::<String>::new());
        assert_eq!(acls.len(), 4);
    }

    #[test]
    fn filters_match_as_kafkas() {
        let prefixed = binding(ResourceType::Topic, "a-", PatternType::Prefixed);
        let literal = binding(ResourceType::Topic, "a-orders", PatternType::Literal);
        let filter = |pattern: i8, name: Option<&str>| {
            AclFilter::from_wire(2, name, pattern, None, None, 1, 1).unwrap()
        };
        // MATCH: the patterns that apply to the name.
        assert!(filter(2, Some("a-orders")).matches(&prefixed));
        assert!(filter(2, Some("a-orders")).matches(&literal));
        assert!(!filter(2, Some("b")).matches(&prefixed));
        // ANY and exact types: the name itself.
        assert!(!filter(1, Some("a-orders")).matches(&prefixed));
        assert!(filter(1, Some("a-")).matches(&prefixed));
        assert!(!filter(3, Some("a-")).matches(&prefixed));
        assert!(filter(4, None).matches(&prefixed));
        assert!(AclFilter::from_wire(0, None, 1, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(1, None, 1, None, None, 0, 1).is_err());
    }
}
