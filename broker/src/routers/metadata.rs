//! The metadata router: changes and producer ids are decided on shard 0 (`METADATA_SHARD`).

use crate::error::{BrokerError, Result};
use crate::mesh::Mesh;
use crate::metadata::decide::MetadataChange;
use crate::services::metadata::{MetadataService, METADATA_SHARD};
use crate::services::producer_ids::{InitProducerId, ProducerIdService};
use shard::io::Storage;
use std::marker::PhantomData;
use std::rc::Rc;

pub struct MetadataRouter<S: Storage> {
    mesh: Rc<Mesh>,
    storage: PhantomData<S>,
}

impl<S: Storage> MetadataRouter<S> {
    pub fn new(mesh: Rc<Mesh>) -> Self {
        MetadataRouter { mesh, storage: PhantomData }
    }

    /// Decides, persists and publishes a metadata change on shard 0; a result per item.
    pub async fn change(&self, change: MetadataChange) -> Vec<Result<()>> {
        match self.mesh.call::<MetadataService<S>, _>(METADATA_SHARD, change).await {
            Ok(results) => results,
            Err(error) => vec![Err(BrokerError::from(error))],
        }
    }

    /// A producer id and epoch from shard 0's allocator.
    pub async fn init_producer_id(&self, producer_id: i64, epoch: i16) -> Result<(i64, i16)> {
        let request = InitProducerId { producer_id, epoch };
        self.mesh.call::<ProducerIdService<S>, _>(METADATA_SHARD, request).await?
    }
}
