//! The client-quota entity and value (KIP-546): the types the metadata image and its records
//! carry, apart from the rules about them (`metadata::quotas`), which read the image.

use crate::error::{BrokerError, Result};

/// Kafka's entity types.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// A quota entity: per type, absent (`None`), the default (`Some(None)`, Kafka's
/// `<default>`), or a name.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    pub user: Option<Option<String>>,
    pub client_id: Option<Option<String>>,
    pub ip: Option<Option<String>>,
}

impl QuotaEntity {
    /// (type, name) pairs, in Kafka's order (user, client-id, ip).
    pub fn components(&self) -> Vec<(&'static str, Option<String>)> {
        [(USER, &self.user), (CLIENT_ID, &self.client_id), (IP, &self.ip)]
            .into_iter()
            .filter_map(|(kind, name)| name.as_ref().map(|name| (kind, name.clone())))
            .collect()
    }

    /// Builds an entity from (type, name) pairs, refusing what Kafka refuses (an empty
    /// entity, an unknown or repeated type, an empty name, ip with user or client-id).
    pub fn from_components(components: &[(String, Option<String>)]) -> Result<Self> {
        let invalid = |why: String| Err(BrokerError::InvalidRequest(why));
        if components.is_empty() {
            return invalid("Invalid empty client quota entity".into());
        }
        let mut entity = QuotaEntity::default();
        for (kind, name) in components {
            let slot = match kind.as_str() {
                USER => &mut entity.user,
                CLIENT_ID => &mut entity.client_id,
                IP => &mut entity.ip,
                other => return invalid(format!("Unhandled client quota entity type: {other}")),
            };
            if slot.is_some() {
                return invalid(format!("Invalid duplicate client quota entity type: {kind}"));
            }
            if name.as_deref() == Some("") {
                return invalid(format!("Empty {kind} not supported"));
            }
            *slot = Some(name.clone());
        }
        if entity.ip.is_some() && (entity.user.is_some() || entity.client_id.is_some()) {
            return invalid(
                "Invalid quota entity combination, IP entity should not be combined with User \
                 or ClientId"
                    .into(),
            );
        }
        Ok(entity)
    }
}

/// A quota's value (a double, as Kafka stores it), compared by its bits so records stay `Eq`.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}
