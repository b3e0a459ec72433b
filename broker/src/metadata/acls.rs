//! CreateAcls and DeleteAcls decided against an image (issue #18): the records that add or
//! remove ACLs (`metadata::acl` has the bindings and filters), as Kafka's `AclControlManager`
//! decides them.

use super::acl::{AclBinding, AclFilter, AclId, Acls};
use super::records::MetadataRecord;

/// CreateAcls: the record of one new binding, or none when an equal one exists (Kafka's
/// controller answers success and adds nothing).
pub fn create(acls: &Acls, binding: &AclBinding, id: AclId) -> Vec<MetadataRecord> {
    if acls.find(binding).is_some() {
        return Vec::new();
    }
    vec![MetadataRecord::Acl { id, binding: binding.clone() }]
}

/// DeleteAcls: the ACLs `filter` matches, by id.
pub fn matching(acls: &Acls, filter: &AclFilter) -> Vec<(AclId, AclBinding)> {
    acls.iter()
        .filter(|(_, binding)| filter.matches(binding))
        .map(|(id, binding)| (*id, binding.clone()))
        .collect()
}

/// DeleteAcls: the records removing those of `ids` that are still present (another deletion
/// may have removed some since they were matched).
pub fn remove(acls: &Acls, ids: &[AclId]) -> Vec<MetadataRecord> {
    let mut seen = std::collections::BTreeSet::new();
    ids.iter()
        .filter(|id| acls.contains(id) && seen.insert(**id))
        .map(|id| MetadataRecord::RemoveAcl { id: *id })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_equal_binding_is_not_added_twice_and_a_removal_names_each_id_once() {
        let ok = AclBinding::from_wire(2, "a-", 4, "User:alice", "*", 3, 3).unwrap();
        let mut acls = Acls::default();
        assert_eq!(create(&acls, &ok, [7; 16]).len(), 1);
        acls.insert([7; 16], ok.clone());
        assert!(create(&acls, &ok, [8; 16]).is_empty());
        let matched = matching(&acls, &AclFilter::from_wire(1, None, 1, None, None, 1, 1).unwrap());
        assert_eq!(matched, vec![([7; 16], ok)]);
        let records = remove(&acls, &[[7; 16], [7; 16], [9; 16]]);
        assert_eq!(records, vec![MetadataRecord::RemoveAcl { id: [7; 16] }]);
    }
}
