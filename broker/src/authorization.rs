//! What a principal may do, as Kafka reports it: ACL operations and the authorized-operations
//! bit fields of Metadata, DescribeCluster and DescribeGroups (KIP-430).
//!
//! Owns: `AclOperation` (Kafka's `AclOperation` codes) and the sets of operations each resource
//! type has. With no authorizer configured every principal may do everything, so the answers
//! are the full sets (what Kafka answers then); ACLs (the security issue) narrow them.
//! References: Kafka `org.apache.kafka.common.acl.AclOperation`, `AclEntry.supportedOperations`.

/// Kafka's ACL operation codes (the bit a set gives each operation is `1 << code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum AclOperation {
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

use AclOperation::*;

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

/// The authorized-operations field of a resource with these operations: the set allowed for
/// the principal when asked (everything: no authorizer), else "not requested".
pub fn authorized(requested: bool, operations: &[AclOperation]) -> i32 {
    if requested {
        bits(operations)
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_sets_are_kafkas() {
        // READ..ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka returns without
        // an authorizer (e.g. kafka-topics --describe through AdminClient).
        assert_eq!(bits(TOPIC_OPERATIONS), 3576);
        assert_eq!(bits(CLUSTER_OPERATIONS), 8096);
        assert_eq!(bits(GROUP_OPERATIONS), 3400);
        assert_eq!(authorized(false, TOPIC_OPERATIONS), -2147483648);
    }
}
