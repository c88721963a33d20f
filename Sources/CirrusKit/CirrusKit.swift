// CirrusKit: the client library (see Docs/ARCHITECTURE.md §1–3 and Docs/WIRE-PROTOCOL.md).
//
// How it is put together:
//
// - `CKContainer` owns one `ConnectionManager`, which keeps one multiplexed TLS connection to
//   the server: `ClientBootstrap` → `TLSHandler` → frame decoder/encoder →
//   `ClientConnectionHandler`. The handler feeds every frame it sends and receives through
//   `ConnectionStateMachine(role: .client)`: `Hello` (client name, version, bearer token) →
//   `HelloAck` (user, limits), then one stream per operation (`Open`, then `Event`s,
//   `Persisted`, `Complete`; `Window` and `Cancel` back), keepalive `Ping`s, `GoAway`.
// - The connection is made lazily when an operation needs it and again after it dropped or
//   drained; consecutive failures space attempts out with capped exponential backoff with
//   jitter. Streams the server never saw (above `GoAway.last_stream_id`) are opened again on
//   the next connection; streams in flight when the connection drops fail with
//   `CKError(.networkFailure)`, except those of long-lived operations.
// - Long-lived operations (`CKContainer+LongLived.swift`, `CKOperation+LongLived.swift`): a
//   `ClientStream` of a long-lived operation outlives its connection. When it drops, the
//   `ConnectionManager` attaches the stream again after the backoff with `Resume{last_seq}`
//   = the last seq handed to the blocks (`Open` again if no `Persisted` came), at most
//   `maximumResumeAttempts` times in a row without progress (a `Resume` refused with
//   `OPERATION_ALREADY_ATTACHED`, the server not yet aware the old connection is gone, is
//   retried the same way on a budget of its own). `EventSequence` lets each seq
//   through once, in order, so the old connection's queued events and the replay never
//   reach the blocks twice. After the result block, `Cancel{completion_acknowledged}` goes
//   out on the stream the `Complete` came on. An operation fetched with
//   `fetchLongLivedOperation` is rebuilt as its subclass from the server's `Open` and
//   starts with `Resume` instead of `Open`.
// - Threads: protocol work runs on the connection's event loop; each operation has its own
//   serial callback queue where its blocks run, in event order, and then `completionBlock`
//   (Foundation's, after the operation finished).
// - Flow control: a stream opens with `initial_window` = `streamWindow` (1,024) events and gets
//   credit back in batches of half the window, only after its callbacks have consumed events,
//   so a slow callback makes the server wait instead of the client buffering: at most the
//   window of events per stream is ever queued on the client. The events of one read burst go
//   to the operation's queue in one hop and earn their credit in one update; a `Window` rides
//   the next flush (the end of the read burst or of the event-loop tick) instead of its own.
// - Subscriptions and push (`Subscriptions/`): `CKModifySubscriptionsOperation` and
//   `CKFetchSubscriptionsOperation` are database operations like the zone ones (subscriptions
//   are checked before anything is sent, including the database's scope rules);
//   `CKFetchNotificationChangesOperation` is container-level (scope UNSPECIFIED) and reads the
//   notifications the server kept. `container.notifications(since:)` (and its callback form
//   `watchNotifications`) runs on `NotificationFeed`: one `WatchNotifications` stream at a
//   time, never long-lived and without timeouts. The server replays what came after `since`,
//   sends `.live(token)`, then pushes each new notification with the feed token after it.
//   When the stream fails for a passing reason, the feed waits the jittered reconnect backoff
//   and opens a new stream with `since` = the last token received, so each notification
//   reaches the consumer once, in order; other errors end the sequence by throwing. Its stream
//   earns credit only when the consumer takes a notification (`ClientStream(creditsOnDelivery:
//   false)`), and a new stream opens only after the consumer has drained the old one, so at
//   most `streamWindow` notifications ever wait on the client.
