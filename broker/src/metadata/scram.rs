//! SCRAM credentials in the cluster metadata (KIP-554): AlterUserScramCredentials and
//! DescribeUserScramCredentials decided against an image, with Kafka's rules and errors
//! (`ScramControlManager` for alterations, the brokers' `describeScramCredentials`).
//!
//! An alteration request is checked as a whole first (`check_alterations`: a (user,
//! mechanism) pair named twice, an empty name, an unknown mechanism, iterations out of
//! bounds), per user, as Kafka answers per user; each user's alterations are then decided
//! against the image (`alter`: deleting a credential that does not exist) by the metadata
//! service, all or none.

use super::image::MetadataImage;
use super::records::MetadataRecord;
use crate::error::{BrokerError, Result};
use crate::sasl::scram::{ScramCredential, ScramMechanism, ITERATIONS_MAX, ITERATIONS_MIN};
use std::collections::BTreeMap;

/// One user's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramAlteration {
    Delete(ScramMechanism),
    Upsert(ScramMechanism, ScramCredential),
}

/// An alteration as the client sent it: (user, mechanism code, `Some` iterations and the
/// credential for an upsertion, `None` for a deletion).
pub type RequestedAlteration = (String, i8, Option<(i32, ScramCredentialInput)>);

/// An upsertion's salt and salted password, as AlterUserScramCredentials carries them.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredentialInput {
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

impl std::fmt::Debug for ScramCredentialInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScramCredentialInput([hidden])")
    }
}

fn mechanism_of(code: i8) -> Result<ScramMechanism> {
    ScramMechanism::from_code(code)
        .ok_or_else(|| BrokerError::UnsupportedSaslMechanism("Unknown SCRAM mechanism".into()))
}

fn check_user(user: &str) -> Result<()> {
    if user.is_empty() {
        return Err(BrokerError::UnacceptableCredential("Username must not be empty".into()));
    }
    Ok(())
}

/// Checks every alteration of a request (deletions first, then upsertions, as Kafka reads
/// them): per user in first-seen order, the user's alterations to decide, or the user's first
/// error (Kafka answers per user, and a user with an error is not altered at all). A (user,
/// mechanism) pair named twice is DUPLICATE_RESOURCE; one user with two mechanisms is not.
pub fn check_alterations(
    requested: Vec<RequestedAlteration>,
) -> Vec<(String, Result<Vec<ScramAlteration>>)> {
    let mut order: Vec<String> = Vec::new();
    let mut outcomes: BTreeMap<String, Result<Vec<ScramAlteration>>> = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for (user, code, upsert) in requested {
        if !outcomes.contains_key(&user) {
            order.push(user.clone());
            outcomes.insert(user.clone(), Ok(Vec::new()));
        }
        let Some(Ok(alterations)) = outcomes.get_mut(&user) else { continue };
        let checked = if seen.insert((user.clone(), code)) {
            check_one(&user, code, upsert)
        } else {
            Err(BrokerError::DuplicateResource(
                "A user credential cannot be altered twice in the same request".into(),
            ))
        };
        match checked {
            Ok(alteration) => alterations.push(alteration),
            Err(error) => {
                outcomes.insert(user, Err(error));
            }
        }
    }
    order
        .into_iter()
        .map(|user| {
            let outcome = outcomes.remove(&user).unwrap_or_else(|| {
                Err(BrokerError::InvalidRequest("a user was lost in checking".into()))
            });
            (user, outcome)
        })
        .collect()
}

/// One alteration's checks that need no image: the name, the mechanism, the iterations.
fn check_one(
    user: &str,
    code: i8,
    upsert: Option<(i32, ScramCredentialInput)>,
) -> Result<ScramAlteration> {
    check_user(user)?;
    let mechanism = mechanism_of(code)?;
    let Some((iterations, input)) = upsert else {
        return Ok(ScramAlteration::Delete(mechanism));
    };
    if iterations < ITERATIONS_MIN {
        return Err(BrokerError::UnacceptableCredential("Too few iterations".into()));
    }
    if iterations > ITERATIONS_MAX {
        return Err(BrokerError::UnacceptableCredential("Too many iterations".into()));
    }
    if input.salt.is_empty() || input.salted_password.len() != mechanism.hash_len() {
        return Err(BrokerError::UnacceptableCredential(format!(
            "the salt must not be empty and the salted password must be {} bytes",
            mechanism.hash_len()
        )));
    }
    let credential = ScramCredential::from_salted_password(
        mechanism,
        &input.salted_password,
        &input.salt,
        iterations,
    );
    Ok(ScramAlteration::Upsert(mechanism, credential))
}

/// The records of one user's checked alterations against `image` (all or none).
pub fn alter(
    image: &MetadataImage,
    user: &str,
    alterations: &[ScramAlteration],
) -> Result<Vec<MetadataRecord>> {
    let mut records = Vec::new();
    for alteration in alterations {
        match alteration {
            ScramAlteration::Delete(mechanism) => {
                if image.scram_credential(user, *mechanism).is_none() {
                    return Err(BrokerError::ResourceNotFound(
                        "Attempt to delete a user credential that does not exist".into(),
                    ));
                }
                records.push(MetadataRecord::RemoveScramCredential {
                    user: user.to_string(),
                    mechanism: *mechanism,
                });
            }
            ScramAlteration::Upsert(mechanism, credential) => {
                records.push(MetadataRecord::ScramCredential {
                    user: user.to_string(),
                    mechanism: *mechanism,
                    credential: credential.clone(),
                })
            }
        }
    }
    Ok(records)
}

/// A described user's (mechanism, iterations), or why it is not described.
pub type Described = Result<Vec<(ScramMechanism, i32)>>;

/// DescribeUserScramCredentials: `users` `None` or empty describes every user with a
/// credential; otherwise each named user once, in request order: its (mechanism, iterations),
/// or DUPLICATE_RESOURCE for a user named twice, RESOURCE_NOT_FOUND for one without any.
pub fn describe(image: &MetadataImage, users: Option<Vec<String>>) -> Vec<(String, Described)> {
    let infos = |user: &str| -> Option<Vec<(ScramMechanism, i32)>> {
        let credentials = image.scram.get(user)?;
        Some(credentials.iter().map(|(m, c)| (*m, c.iterations)).collect())
    };
    let users = match users {
        Some(users) if !users.is_empty() => users,
        _ => {
            return image
                .scram
                .keys()
                .map(|user| (user.clone(), Ok(infos(user).unwrap_or_default())))
                .collect()
        }
    };
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for user in &users {
        *counts.entry(user).or_default() += 1;
    }
    let mut answered = std::collections::BTreeSet::new();
    let mut results = Vec::new();
    for user in &users {
        if !answered.insert(user.clone()) {
            continue;
        }
        let outcome = if counts.get(user.as_str()).copied().unwrap_or(0) > 1 {
            Err(BrokerError::DuplicateResource(format!(
                "Cannot describe SCRAM credentials for the same user twice in a single request: \
                 {user}"
            )))
        } else {
            infos(user).ok_or_else(|| {
                BrokerError::ResourceNotFound(format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                ))
            })
        };
        results.push((user.clone(), outcome));
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::error_code;
    use crate::metadata::apply_all;

    fn input(mechanism: ScramMechanism) -> ScramCredentialInput {
        ScramCredentialInput { salt: vec![7; 16], salted_password: vec![1; mechanism.hash_len()] }
    }

    fn upsert(user: &str, code: i8, iterations: i32) -> RequestedAlteration {
        let mechanism = ScramMechanism::from_code(code).unwrap_or(ScramMechanism::Sha256);
        (user.to_string(), code, Some((iterations, input(mechanism))))
    }

    fn codes(outcomes: &[(String, Result<Vec<ScramAlteration>>)]) -> Vec<(String, i16)> {
        outcomes
            .iter()
            .map(|(user, outcome)| (user.clone(), outcome.as_ref().err().map_or(0, error_code)))
            .collect()
    }

    #[test]
    fn alterations_are_checked_per_user_with_kafkas_codes() {
        let checked = check_alterations(vec![
            ("gone".into(), 1, None),
            upsert("ok", 2, 8192),
            upsert("", 1, 8192),
            upsert("few", 1, 4095),
            upsert("many", 1, 16385),
            upsert("nomech", 3, 8192),
            ("twice".into(), 1, None),
            upsert("twice", 2, 8192),
            upsert("twice", 1, 8192),
            upsert("both", 1, 4096),
            upsert("both", 2, 16384),
        ]);
        assert_eq!(
            codes(&checked),
            vec![
                ("gone".into(), 0),
                ("ok".into(), 0),
                ("".into(), 93),
                ("few".into(), 93),
                ("many".into(), 93),
                ("nomech".into(), 33),
                ("twice".into(), 92),
                ("both".into(), 0),
            ]
        );
        assert_eq!(
            checked.last().map(|(_, outcome)| outcome.as_ref().map(Vec::len).ok()),
            Some(Some(2))
        );
    }

    #[test]
    fn credentials_are_set_replaced_deleted_and_described() {
        let image = MetadataImage::default();
        let checked = check_alterations(vec![upsert("alice", 1, 4096), upsert("bob", 2, 8192)]);
        let mut records = Vec::new();
        for (user, outcome) in &checked {
            records.extend(alter(&image, user, outcome.as_ref().expect("valid")).expect("ok"));
        }
        let image = apply_all(&image, &records).expect("applies");
        let all = describe(&image, None);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].1.as_ref().expect("alice"), &vec![(ScramMechanism::Sha256, 4096)]);
        let named = describe(&image, Some(vec!["bob".into(), "carol".into(), "bob".into()]));
        let named: Vec<i16> =
            named.iter().map(|(_, r)| r.as_ref().err().map_or(0, error_code)).collect();
        assert_eq!(named, vec![92, 91]);
        let deletion = [ScramAlteration::Delete(ScramMechanism::Sha512)];
        assert_eq!(alter(&image, "alice", &deletion).map_err(|e| error_code(&e)), Err(91));
        let image = apply_all(&image, &alter(&image, "bob", &deletion).expect("bob")).expect("ok");
        assert!(!image.scram.contains_key("bob"));
        let stored = image.scram_credential("alice", ScramMechanism::Sha256).expect("alice");
        assert_ne!(stored.stored_key, vec![1; 32], "the salted password is not what is kept");
    }
}
