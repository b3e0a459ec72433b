//! The cross-core mesh transport: typed calls from one shard to a service on another.
//!
//! Owns: the `Service` trait (an owner-side domain), `Ask` (a request type, which fixes its
//! answer's type) and `Answers<R>` (a service answers `R`), the per-shard registry of
//! services, `Mesh::call` (answered in place when the target is this shard), the receive
//! loops, and the bound on requests in progress per service per shard.
//! Calls are typed: `call::<S, R>` compiles only when `S: Answers<R>`, and its result is
//! `R::Answer`, so a caller never receives another request's answer and has nothing to fall
//! back on. The sending shard passes the (service, request) pair's handler, a function
//! monomorphised at the call, along with the request; the owner shard runs it on its own
//! instance of the service.
//! The transport knows no domain: a new service is a new `Service` with its `Answers`
//! implementations, registered at startup, never a new variant of a shared enum.
//!
//! Two glommio channel meshes link every pair of shards: one carries requests, the other
//! responses, so an answer is never stuck behind requests waiting for their permit.
//! Invariants:
//! - record data crosses cores as `Bytes` inside the typed request (shared, never re-encoded);
//! - every request is answered exactly once, on the shard that asked (or the caller learns the
//!   channel closed);
//! - a shard runs at most `Service::IN_PROGRESS_MAX` requests of a service for other shards at
//!   once; past it its receive loop stops taking requests, the channel fills, and senders wait
//!   (back-pressure), never an unbounded number of tasks.
//!
//! Runs on: every shard; a `Mesh` is the calling shard's own end (`Rc`, not `Send`).

use crate::error::MeshError;
use futures_util::future::LocalBoxFuture;
use shard::runtime::mesh::{MeshEnds, MeshHandle, Receiver, Senders};
use shard::runtime::ShardId;
use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Channel depth between each pair of shards, per direction.
pub const MESH_QUEUE_DEPTH_MAX: usize = 1024;

/// An owner-side domain: it holds its own state on every shard and answers its own requests
/// (`Answers`).
pub trait Service: 'static {
    /// For logs and metrics.
    const NAME: &'static str;
    /// Requests of this service a shard handles at once for other shards.
    const IN_PROGRESS_MAX: usize;
}

/// A request one shard sends another: its type fixes the type of its answer.
pub trait Ask: Send + 'static {
    type Answer: Send + 'static;
}

/// A service that answers requests of type `R`. A call names the service and the request, and
/// its result is the request's answer type:
/// ```no_run
/// use broker::mesh::{Answers, Ask, Mesh, Service};
/// use futures_util::future::LocalBoxFuture;
/// use std::rc::Rc;
/// struct Ping;
/// impl Ask for Ping { type Answer = u32; }
/// struct Echo;
/// impl Service for Echo { const NAME: &'static str = "echo"; const IN_PROGRESS_MAX: usize = 1; }
/// impl Answers<Ping> for Echo {
///     fn answer(self: Rc<Self>, _: Ping) -> LocalBoxFuture<'static, u32> {
///         Box::pin(async { 1 })
///     }
/// }
/// async fn ask(mesh: &Mesh) {
///     let answer: Result<u32, _> = mesh.call::<Echo, Ping>(mesh.id(), Ping).await;
/// }
/// ```
/// The same call with a request the service does not answer does not compile:
/// ```compile_fail
/// use broker::mesh::{Answers, Ask, Mesh, Service};
/// use futures_util::future::LocalBoxFuture;
/// use std::rc::Rc;
/// struct Ping;
/// impl Ask for Ping { type Answer = u32; }
/// struct Pong;
/// impl Ask for Pong { type Answer = String; }
/// struct Echo;
/// impl Service for Echo { const NAME: &'static str = "echo"; const IN_PROGRESS_MAX: usize = 1; }
/// impl Answers<Ping> for Echo {
///     fn answer(self: Rc<Self>, _: Ping) -> LocalBoxFuture<'static, u32> {
///         Box::pin(async { 1 })
///     }
/// }
/// async fn ask(mesh: &Mesh) {
///     // Echo answers Ping, not Pong.
///     let _ = mesh.call::<Echo, Pong>(mesh.id(), Pong).await;
/// }
/// ```
/// and neither does reading an answer as another type:
/// ```compile_fail
/// # use broker::mesh::{Answers, Ask, Mesh, Service};
/// # use futures_util::future::LocalBoxFuture;
/// # use std::rc::Rc;
/// # struct Ping;
/// # impl Ask for Ping { type Answer = u32; }
/// # struct Echo;
/// # impl Service for Echo { const NAME: &'static str = "echo"; const IN_PROGRESS_MAX: usize = 1; }
/// # impl Answers<Ping> for Echo {
/// #     fn answer(self: Rc<Self>, _: Ping) -> LocalBoxFuture<'static, u32> {
/// #         Box::pin(async { 1 })
/// #     }
/// # }
/// async fn ask(mesh: &Mesh) {
///     let answer: Result<String, _> = mesh.call::<Echo, Ping>(mesh.id(), Ping).await;
/// }
/// ```
pub trait Answers<R: Ask>: Service {
    fn answer(self: Rc<Self>, request: R) -> LocalBoxFuture<'static, R::Answer>;
}

/// Implements `Answers<$request>` for `$service<S>`, a service generic over its storage:
/// `answers!(PartitionService, Read, |service, read| service.read(read).await);`
macro_rules! answers {
    ($service:ident, $request:ty, |$this:ident, $req:pat_param| $body:expr) => {
        impl<S: shard::io::Storage> $crate::mesh::Answers<$request> for $service<S> {
            fn answer(
                self: std::rc::Rc<Self>,
                request: $request,
            ) -> futures_util::future::LocalBoxFuture<
                'static,
                <$request as $crate::mesh::Ask>::Answer,
            > {
                Box::pin(async move {
                    let $this = self;
                    let $req = request;
                    $body
                })
            }
        }
    };
}
pub(crate) use answers;

type Body = Box<dyn Any + Send>;

/// Runs one (service, request) pair on the owner shard: made at the call, from the types.
type Handler = fn(Rc<dyn Any>, Body) -> LocalBoxFuture<'static, Body>;

/// The handler of `R` by `S`. The sender built the body from an `R` and named `S`, so both
/// downcasts succeed.
fn handler_of<S: Answers<R>, R: Ask>(
    service: Rc<dyn Any>,
    body: Body,
) -> LocalBoxFuture<'static, Body> {
    match (service.downcast::<S>(), body.downcast::<R>()) {
        (Ok(service), Ok(request)) => {
            Box::pin(async move { Box::new(service.answer(*request).await) as Body })
        }
        _ => unreachable!("a {} request of another type", S::NAME),
    }
}

/// A request on the mesh: the service is named by its type, the request by its handler.
pub struct MeshRequest {
    id: u64,
    from: u16,
    service: TypeId,
    handler: Handler,
    body: Body,
}

pub struct MeshResponse {
    id: u64,
    body: Body,
}

/// The glommio meshes every shard joins at startup (built once, cloned to each shard).
#[derive(Clone)]
pub struct MeshHandles {
    requests: MeshHandle<MeshRequest>,
    responses: MeshHandle<MeshResponse>,
}

impl MeshHandles {
    pub fn new(shard_count: usize) -> Self {
        Self {
            requests: MeshHandle::new(shard_count, MESH_QUEUE_DEPTH_MAX),
            responses: MeshHandle::new(shard_count, MESH_QUEUE_DEPTH_MAX),
        }
    }
}

/// This shard's receiving ends, consumed by `Mesh::start`.
pub struct MeshReceivers {
    requests: Vec<(usize, Receiver<MeshRequest>)>,
    responses: Vec<(usize, Receiver<MeshResponse>)>,
}

/// A registered service: its name, this shard's instance, and its permits.
#[derive(Clone)]
struct Registered {
    name: &'static str,
    service: Rc<dyn Any>,
    permits: Rc<Permits>,
}

/// A count of requests a service may have in progress on this shard (a semaphore for one
/// thread: no atomics).
struct Permits {
    available: Cell<usize>,
    freed: event_listener::Event,
}

/// Held while a request is in progress; gives its permit back when dropped.
struct Permit(Rc<Permits>);

impl Permits {
    fn new(count: usize) -> Self {
        assert!(count > 0, "a service needs at least one request in progress");
        Permits { available: Cell::new(count), freed: event_listener::Event::new() }
    }

    async fn acquire(permits: &Rc<Permits>) -> Permit {
        loop {
            let available = permits.available.get();
            if available > 0 {
                permits.available.set(available - 1);
                return Permit(permits.clone());
            }
            let listener = permits.freed.listen();
            if permits.available.get() == 0 {
                listener.await;
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.available.set(self.0.available.get() + 1);
        self.0.freed.notify(1);
    }
}

/// Requests this shard sent to and took from other shards, by service.
#[derive(Debug, Clone, Default)]
pub struct MeshCounters {
    pub routed_out: BTreeMap<&'static str, u64>,
    pub routed_in: BTreeMap<&'static str, u64>,
}

struct Links {
    requests: Senders<MeshRequest>,
    responses: Senders<MeshResponse>,
}

/// A started call (`Mesh::start_call`); awaiting it yields the answer.
pub enum Call<R: 'static> {
    /// Answered in place while starting.
    Answered(Option<R>),
    /// On this shard, waiting inside its handler.
    Local(LocalBoxFuture<'static, R>),
    /// Queued on another shard.
    Remote {
        target: ShardId,
        receiver: futures_channel::oneshot::Receiver<Body>,
        answer: std::marker::PhantomData<R>,
    },
}

// The answer is only ever moved out, never pinned in place.
impl<R: 'static> Unpin for Call<R> {}

impl<R: 'static> std::future::Future for Call<R> {
    type Output = Result<R, MeshError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        // Every field is Unpin (boxed futures, a oneshot receiver).
        match self.get_mut() {
            Call::Answered(answer) => match answer.take() {
                Some(answer) => Poll::Ready(Ok(answer)),
                None => panic!("a mesh call polled after it completed"),
            },
            Call::Local(future) => future.as_mut().poll(context).map(Ok),
            Call::Remote { target, receiver, .. } => {
                let target = target.0;
                match std::pin::Pin::new(receiver).poll(context) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Err(_)) => Poll::Ready(Err(MeshError::Dropped(target))),
                    Poll::Ready(Ok(body)) => Poll::Ready(match body.downcast::<R>() {
                        Ok(response) => Ok(*response),
                        Err(other) => Err(other
                            .downcast::<MeshError>()
                            .map(|error| *error)
                            .unwrap_or(MeshError::NoService("?", target))),
                    }),
                }
            }
        }
    }
}

/// One shard's end of the mesh.
pub struct Mesh {
    id: ShardId,
    shard_count: usize,
    links: Option<Links>,
    pending: RefCell<HashMap<u64, futures_channel::oneshot::Sender<Body>>>,
    next_id: Cell<u64>,
    services: RefCell<HashMap<TypeId, Registered>>,
    counters: RefCell<MeshCounters>,
}

impl Mesh {
    /// A mesh of one shard (no channels): every call is answered in place.
    pub fn single() -> Self {
        Self::with_links(ShardId(0), 1, None)
    }

    fn with_links(id: ShardId, shard_count: usize, links: Option<Links>) -> Self {
        Mesh {
            id,
            shard_count,
            links,
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(0),
            services: RefCell::new(HashMap::new()),
            counters: RefCell::new(MeshCounters::default()),
        }
    }

    /// Joins both meshes from shard `id`; returns when every shard has joined.
    pub async fn join(
        id: ShardId,
        shard_count: usize,
        handles: &MeshHandles,
    ) -> Result<(Self, MeshReceivers), String> {
        let requests: MeshEnds<MeshRequest> = handles.requests.join(usize::from(id.0)).await?;
        let responses: MeshEnds<MeshResponse> = handles.responses.join(usize::from(id.0)).await?;
        let links = Links { requests: requests.senders, responses: responses.senders };
        let receivers =
            MeshReceivers { requests: requests.receivers, responses: responses.receivers };
        Ok((Self::with_links(id, shard_count, Some(links)), receivers))
    }

    pub fn id(&self) -> ShardId {
        self.id
    }

    pub fn shard_count(&self) -> usize {
        self.shard_count
    }

    /// Every shard of this node, in order.
    pub fn shards(&self) -> impl Iterator<Item = ShardId> {
        (0..self.shard_count).map(|index| ShardId(index as u16))
    }

    /// Makes `service` this shard's owner side of `S`. Every shard registers the same services
    /// before `start`.
    pub fn register<S: Service>(&self, service: Rc<S>) {
        let permits = Rc::new(Permits::new(S::IN_PROGRESS_MAX));
        let entry = Registered { name: S::NAME, service, permits };
        let previous = self.services.borrow_mut().insert(TypeId::of::<S>(), entry);
        assert!(previous.is_none(), "service {} registered twice", S::NAME);
    }

    /// This shard's own instance of `S`.
    pub fn local<S: Service>(&self) -> Option<Rc<S>> {
        let service = self.services.borrow().get(&TypeId::of::<S>())?.service.clone();
        service.downcast::<S>().ok()
    }

    /// Sends `request` to `S` on `target` and waits for its answer (in place on this shard).
    pub async fn call<S: Answers<R>, R: Ask>(
        &self,
        target: ShardId,
        request: R,
    ) -> Result<R::Answer, MeshError> {
        self.start_call::<S, R>(target, request).await?.await
    }

    /// Starts a call: returns once `request` is queued on `target` (or, on this shard, its
    /// handler has run up to its first wait), with the answer still to come. Calls one task
    /// starts one after another reach their service in that order, so a handler that takes its
    /// place in a queue before its first wait (a partition's append order) keeps the caller's.
    pub async fn start_call<S: Answers<R>, R: Ask>(
        &self,
        target: ShardId,
        request: R,
    ) -> Result<Call<R::Answer>, MeshError> {
        if target == self.id {
            let service = self.local::<S>().ok_or(MeshError::NoService(S::NAME, target.0))?;
            let mut future = service.answer(request);
            return Ok(match futures_lite::future::poll_once(&mut future).await {
                Some(response) => Call::Answered(Some(response)),
                None => Call::Local(future),
            });
        }
        let links = self.links.as_ref().ok_or(MeshError::ChannelClosed(target.0))?;
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        *self.counters.borrow_mut().routed_out.entry(S::NAME).or_default() += 1;
        let (sender, receiver) = futures_channel::oneshot::channel();
        self.pending.borrow_mut().insert(id, sender);
        let message = MeshRequest {
            id,
            from: self.id.0,
            service: TypeId::of::<S>(),
            handler: handler_of::<S, R>,
            body: Box::new(request),
        };
        if links.requests.send_to(usize::from(target.0), message).await.is_err() {
            self.pending.borrow_mut().remove(&id);
            return Err(MeshError::ChannelClosed(target.0));
        }
        Ok(Call::Remote { target, receiver, answer: std::marker::PhantomData })
    }

    /// Calls `S` on every shard of this node, in shard order, and returns the answers.
    pub async fn call_all<S: Answers<R>, R: Ask>(
        &self,
        request: impl Fn() -> R,
    ) -> Vec<Result<R::Answer, MeshError>> {
        let mut answers = Vec::with_capacity(self.shard_count);
        for target in self.shards() {
            answers.push(self.call::<S, R>(target, request()).await);
        }
        answers
    }

    /// Calls this shard is waiting on.
    pub fn pending_calls(&self) -> usize {
        self.pending.borrow().len()
    }

    pub fn counters(&self) -> MeshCounters {
        self.counters.borrow().clone()
    }

    /// Starts the receive loops (after every service is registered).
    pub fn start(self: &Rc<Self>, receivers: MeshReceivers) {
        for (peer, receiver) in receivers.requests {
            shard::runtime::spawn(self.clone().receive_requests(peer, receiver)).detach();
        }
        for (peer, receiver) in receivers.responses {
            shard::runtime::spawn(self.clone().receive_responses(peer, receiver)).detach();
        }
    }

    async fn receive_requests(self: Rc<Self>, peer: usize, receiver: Receiver<MeshRequest>) {
        while let Some(request) = receiver.recv().await {
            let entry = self.services.borrow().get(&request.service).cloned();
            let Some(entry) = entry else {
                tracing::error!(peer, "a request for a service this shard does not have");
                self.answer(
                    request.from,
                    request.id,
                    Box::new(MeshError::NoService("?", self.id.0)),
                )
                .await;
                continue;
            };
            *self.counters.borrow_mut().routed_in.entry(entry.name).or_default() += 1;
            // Back-pressure: wait for a permit before taking the next request from this peer.
            let permit = Permits::acquire(&entry.permits).await;
            let mesh = self.clone();
            shard::runtime::spawn(async move {
                let body = (request.handler)(entry.service, request.body).await;
                drop(permit);
                mesh.answer(request.from, request.id, body).await;
            })
            .detach();
        }
        tracing::debug!(peer, "mesh request channel closed");
    }

    async fn answer(&self, to: u16, id: u64, body: Body) {
        let Some(links) = self.links.as_ref() else { return };
        let response = MeshResponse { id, body };
        if links.responses.send_to(usize::from(to), response).await.is_err() {
            tracing::warn!(to, "could not answer a shard request: channel closed");
        }
    }

    async fn receive_responses(self: Rc<Self>, peer: usize, receiver: Receiver<MeshResponse>) {
        while let Some(response) = receiver.recv().await {
            let waiter = self.pending.borrow_mut().remove(&response.id);
            if let Some(waiter) = waiter {
                let _ = waiter.send(response.body);
            }
        }
        tracing::debug!(peer, "mesh response channel closed");
    }
}
